"""The broker's data server: the process that owns the broker's public port.

It serves the TCP data path (SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and
PULL_MESSAGE with its long polling) with the broker's own processors, in a process of its
own, so their Python never shares a GIL with supervision (DESIGN §1); everything else a
client sends it relays, frame by frame, to the control server in the supervisor
(``remoting.relay``), which sees one connection per client with the client's address.

``process``: the supervisor's side (spawn, restart on the same port, stop); ``serve``: the
process itself; ``routing``: which requests it serves; ``tables``: the broker's config,
topics and groups as the control server has them; ``context``: what its processors get;
``reports``: what it tells the control server (pulls, request metrics) and the control
server's handlers for it.
"""
