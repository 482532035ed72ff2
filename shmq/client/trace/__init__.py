"""RocketMQ 4.x's message trace: trace records (``encoder``) written by producers and
consumers with ``enable_msg_trace=True`` through an asynchronous dispatcher
(``dispatcher``) from their hooks (``send_hook``, ``consume_hook``), and read back as a
message's timeline (``view``)."""
