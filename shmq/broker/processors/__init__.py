"""The broker's request processors, one per RocketMQ processor (send, pull, reply, end
transaction, client manage, consumer manage, query message, admin) and shmq's own local
registration, run by the supervisor's servers; each gets the narrow broker context
(``broker.context``), never the supervisor."""
