"""shmq: Apache RocketMQ's design as a multiprocess shared-memory message broker for one host.

The client API (producers, consumers) arrives with its own issue; the storage engine is in
``shmq.store``.
"""

__version__ = "0.1.0"
