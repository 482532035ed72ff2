"""Half messages pending per producer group: what ``shmq admin trans-status`` shows; and
putting back a half message discarded after ``transactionCheckMax`` checks
(``shmq admin resume-check-half-msg``, mqadmin's ``resumeCheckHalfMessage``).

Each master broker answers ``GET_TRANSACTION_STATUS`` (shmq's own request) from its table of
open transactions: per producer group, how many half messages still wait for a commit or
rollback, the age of the oldest, the most check-backs one had, how many producers of the
group are online to answer a check-back, and the first transaction ids. A group with
pending halves and no producer online waits for one (its checks are not counted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shmq.errors import ClientError, InvalidMessageIdError
from shmq.message import parse_offset_msg_id
from shmq.names import CHECK_MAX_TIME_TOPIC
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


def resume_check_half_message(admin: Any, msg_id: str) -> str:
    """Put the discarded half message ``msg_id`` back in its broker's half queue with no
    check counted, so its producer group is asked about it again; returns its offset
    message id. ``msg_id`` is its offset message id or, as mqadmin tries next, its unique
    key (the transaction id), looked up in ``TRANS_CHECK_MAX_TIME_TOPIC``: both are 32 hex
    digits. ``admin`` is the ``Admin``."""
    target = _broker_storing(admin, msg_id)
    if target is None:
        msg_id = admin.query_msg_by_unique_key(CHECK_MAX_TIME_TOPIC, msg_id)["offsetMsgId"]
        target = _broker_storing(admin, msg_id)
        if target is None:
            raise ClientError(f"no master broker stores {msg_id}")
    admin._call(target, RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": msg_id})
    return msg_id


def _broker_storing(admin: Any, msg_id: str) -> tuple[str, str] | None:
    """The master whose store host ``msg_id`` names, when it is an offset message id."""
    try:
        host, _ = parse_offset_msg_id(msg_id)
    except InvalidMessageIdError:
        return None
    return admin._by_store_host(host)
