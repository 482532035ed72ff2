"""The receipt handle of a message received through the proxy: the broker's POP receipt
(``shmq.pop_receipt``: its checkpoint's start offset, pop time, invisible time, revive
queue, retry flag, broker, queue, queue offset) and the message's CommitLog offset, space
separated (RocketMQ's ``ReceiptHandle``; the offset is what
ForwardMessageToDeadLetterQueue sends back by).

A handle comes back from clients, so it is parsed as untrusted text: anything that is not
one is ``INVALID_RECEIPT_HANDLE``, as RocketMQ's proxy answers.
"""

from __future__ import annotations

import time

from shmq.pop_receipt import InvalidReceiptError, Receipt, parse_receipt
from shmq.proxy.status import Code, ProxyError

EXPIRED = "receipt handle is expired"


def decode_handle(text: str) -> Receipt:
    """Parse a handle; ``ProxyError(INVALID_RECEIPT_HANDLE)`` when it is not one."""
    try:
        return parse_receipt(text)
    except InvalidReceiptError:
        raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is invalid") from None


def now_ms() -> int:
    return time.time_ns() // 1_000_000
