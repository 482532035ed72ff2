"""Transactions of the proxy's clients (RocketMQ 5.3's proxy ``TransactionService``): what an
EndTransaction needs of its half message, and the broker's check-backs turned into commands
for a client.

A gRPC client ends a transaction by its id; the broker's END_TRANSACTION names the half
message by its CommitLog and queue offsets. The proxy notes them when the half is sent, and
again when the broker checks the half back (its check-back copy has offsets of its own).
Noted transactions are kept for ``TRANSACTION_DATA_TTL_S`` and at most
``MAX_TRANSACTIONS`` of them, oldest forgotten first: a transaction not ended by then is
the broker's to check back, which notes it again.
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass

TRANSACTION_DATA_TTL_S = 3600.0
MAX_TRANSACTIONS = 100_000


@dataclass(frozen=True)
class TransactionData:
    """The half message of a transaction as END_TRANSACTION names it."""

    producer_group: str
    tran_state_table_offset: int  # the half's queue offset
    commit_log_offset: int
    message_id: str
    noted_at: float


class TransactionTable:
    """Transactions by (producer group, transaction id); used from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: collections.OrderedDict[tuple[str, str], TransactionData] = (
            collections.OrderedDict()
        )

    def note(self, group: str, transaction_id: str, queue_offset: int, commit_log_offset: int,
             message_id: str) -> None:  # fmt: skip
        now = time.monotonic()
        data = TransactionData(group, queue_offset, commit_log_offset, message_id, now)
        with self._lock:
            self._data[(group, transaction_id)] = data
            self._data.move_to_end((group, transaction_id))
            while self._data:
                oldest = next(iter(self._data.values()))
                if (
                    len(self._data) <= MAX_TRANSACTIONS
                    and now - oldest.noted_at < TRANSACTION_DATA_TTL_S
                ):
                    break
                self._data.popitem(last=False)

    def take(self, group: str, transaction_id: str) -> TransactionData | None:
        """The transaction's data, forgotten (it is being ended)."""
        with self._lock:
            return self._data.pop((group, transaction_id), None)
