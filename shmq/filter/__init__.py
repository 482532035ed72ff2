"""Message filters shared by the broker and the clients: RocketMQ's SQL92 property filter
(``sql92``). Tag filters stay where the consume queue's tag hashes are (``store.results``)."""

from shmq.filter.sql92 import SqlFilter, compile_sql

__all__ = ["SqlFilter", "compile_sql"]
