"""Half messages pending per producer group: what ``shmq admin trans-status`` shows.

Each master broker answers ``GET_TRANSACTION_STATUS`` (shmq's own request) from its table of
open transactions: per producer group, how many half messages still wait for a commit or
rollback, the age of the oldest, the most check-backs one had, how many producers of the
group are online to answer a check-back, and the first transaction ids. A group with
pending halves and no producer online waits for one (its checks are not counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shmq.remoting.protocol import RequestCode

Call = Callable[..., tuple[Any, Any]]


def trans_status(
    call: Call, brokers: list[tuple[str, str]], group: str | None = None
) -> list[dict[str, Any]]:
    """One row per (broker, producer group) with half messages pending, ``group``'s only
    when given: ``brokerName``, ``producerGroup``, ``pending``, ``oldestAgeMs``,
    ``maxCheckTimes``, ``producersOnline``, ``transactionIds`` (the first few). ``call`` is
    the admin's request to one ``(name, address)`` of ``brokers``."""
    fields = {"producerGroup": group} if group else None
    rows = []
    for broker in brokers:
        _, body = call(broker, RequestCode.GET_TRANSACTION_STATUS, fields)
        rows += [{"brokerName": broker[0], **entry} for entry in (body or {}).get("groups", [])]
    return sorted(rows, key=lambda r: (r["producerGroup"], r["brokerName"]))
