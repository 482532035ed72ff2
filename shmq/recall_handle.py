"""RocketMQ 5.3's recall handle (``RecallMessageHandle.HandleV1``): what a send of a timer
message answers, and what a producer gives back to recall the message before its time.

The broker builds it (the send's response header ``recallHandle``), the gRPC proxy passes it
on (``SendResultEntry.recall_handle``) and decodes it to find the broker, the broker decodes
it again to write the delete marker; so it lives here, beside the message types. The format
is RocketMQ's: URL-safe Base64 of five fields joined by one space::

    v1 <real topic> <broker name> <timestamp> <message id (UNIQ_KEY)>

where the timestamp is the message's ``TIMER_OUT_MS`` + 1 ("consider of floor": RocketMQ
floors a delivery time to its wheel's precision, and a time one past the floored one floors
to the same slot). A handle comes from a client, so decoding checks it as RocketMQ's
``decodeHandle`` does and raises ``InvalidRecallHandleError`` with its message.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from shmq.errors import ShmqError

VERSION_1 = "v1"
SEPARATOR = " "
INVALID = "recall handle is invalid"  # RocketMQ's message for every undecodable handle
# Java's URL-safe decoder: that alphabet, then at most two '=' that complete a 4-char unit
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]*(?:[A-Za-z0-9_-]{2}==|[A-Za-z0-9_-]{3}=)?")


class InvalidRecallHandleError(ShmqError, ValueError):
    """A recall handle that is not RocketMQ's format (not Base64, not ``v1``, too few
    fields)."""


@dataclass(frozen=True)
class RecallHandle:
    """One handle's fields; ``timestamp`` stays text, as RocketMQ keeps ``timestampStr``
    (the broker decides what a time that is not a number means)."""

    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        """``buildHandle``: no field is checked, as RocketMQ checks none."""
        raw = SEPARATOR.join((VERSION_1, self.topic, self.broker_name, self.timestamp,
                              self.message_id))  # fmt: skip
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def for_timer(cls, topic: str, broker_name: str, out_ms: int, message_id: str) -> RecallHandle:
        """The handle of a timer message stored with ``TIMER_OUT_MS`` ``out_ms``."""
        return cls(topic, broker_name, str(out_ms + 1), message_id)

    @classmethod
    def decode(cls, handle: str) -> RecallHandle:
        """``decodeHandle``: Base64 (URL-safe alphabet, padding optional), UTF-8 with
        replacement, split on single spaces (Java's ``split`` drops trailing empty
        fields), ``v1`` and at least five fields (any after the fifth are ignored)."""
        if not handle or not _URL_SAFE.fullmatch(handle):
            raise InvalidRecallHandleError(INVALID)
        try:
            data = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4))
        except (binascii.Error, ValueError):
            raise InvalidRecallHandleError(INVALID) from None
        items = data.decode("utf-8", "replace").split(SEPARATOR)
        while len(items) > 1 and not items[-1]:
            items.pop()
        if items[0] != VERSION_1 or len(items) < 5:
            raise InvalidRecallHandleError(INVALID)
        return cls(items[1], items[2], items[3], items[4])
