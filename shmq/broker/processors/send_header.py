"""The header of RocketMQ's send requests: ``SendMessageRequestHeader`` (SEND_MESSAGE) and
``SendMessageRequestHeaderV2`` (SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE), whose fields have
one-letter names ``a`` .. ``n`` in that order (``n``, the broker name, is 5.x's and not
read); and the delay a message's properties ask for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from shmq.codec.record_rebuild import property_value
from shmq.remoting.custom_header import BOOL, INT, LONG, STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError

# SendMessageRequestHeader, and SendMessageRequestHeaderV2's one-letter names for it
SEND_HEADER: Spec = {
    "producerGroup": (STR, True),
    "topic": (STR, True),
    "defaultTopic": (STR, True),
    "defaultTopicQueueNums": (INT, True),
    "queueId": (INT, True),
    "sysFlag": (INT, True),
    "bornTimestamp": (LONG, True),
    "flag": (INT, True),
    "properties": (STR, False),
    "reconsumeTimes": (INT, False),
    "unitMode": (BOOL, False),
    "batch": (BOOL, False),
    "maxReconsumeTimes": (INT, False),
}
V2_NAMES = dict(zip("abcdefghijkml", SEND_HEADER, strict=True))  # k unitMode, m batch
SEND_HEADER_V2: Spec = {short: SEND_HEADER[name] for short, name in V2_NAMES.items()}


@dataclass
class SendHeader:
    """A send request's header under SendMessageRequestHeader's names, whatever the code."""

    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: str | None
    reconsumeTimes: int | None
    unitMode: bool | None
    batch: bool | None
    maxReconsumeTimes: int | None

    @classmethod
    def parse(cls, request: RemotingCommand) -> SendHeader:
        if request.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_REPLY_MESSAGE):
            return cls(**decode_header(request, SEND_HEADER))
        short = decode_header(request, SEND_HEADER_V2)
        return cls(**{V2_NAMES[k]: v for k, v in short.items()})


def asked_delay(props: bytes) -> tuple[int, int]:
    """``(delay level, delivery time in ms)`` asked for by the properties (``DELAY``,
    or 5.x's ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``)."""
    values = {}
    for name in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"):
        text = property_value(props, name.encode())
        if text is not None:
            try:
                values[name] = int(text)
            except ValueError:
                raise ResponseError(
                    ResponseCode.MESSAGE_ILLEGAL, f"property {name} = {text!r} is not an integer"
                ) from None
    now = time.time_ns() // 1_000_000
    if values.get("DELAY", 0) > 0:
        return values["DELAY"], 0
    if "TIMER_DELIVER_MS" in values:
        return 0, values["TIMER_DELIVER_MS"]
    if "TIMER_DELAY_SEC" in values:
        return 0, now + values["TIMER_DELAY_SEC"] * 1000
    if "TIMER_DELAY_MS" in values:
        return 0, now + values["TIMER_DELAY_MS"]
    return 0, 0
