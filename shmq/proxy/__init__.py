"""RocketMQ 5's gRPC proxy (``apache.rocketmq.v2.MessagingService``) as a process of the
broker's group: RocketMQ's LOCAL mode in where it runs, its CLUSTER mode in how it works (it
reaches the broker only through remoting requests to the control server, so the broker's
processors stay the one implementation of every request).

``process.run_proxy`` is the process; ``service`` answers the RPCs with the activities of
``producer``, ``consumer``, ``route`` and ``clients``, which talk to the broker through
``broker``. The protos (RocketMQ's names and field numbers) are in ``protos/``, their
generated modules in ``v2`` (``python -m shmq.proxy.generate``).
"""
