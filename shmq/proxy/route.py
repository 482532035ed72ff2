"""QueryRoute and QueryAssignment (RocketMQ 5.3's ``RouteActivity``): the queues a client
sees of a topic on this broker, every one addressed to this proxy.

The queue ids are the proxy's, not the broker's (RocketMQ renumbers them too): read-only
queues first, then write-only, then read-write, then a NONE queue when the topic is neither
readable nor writable; sends and receives pick the broker's queues themselves.
"""

from __future__ import annotations

from typing import Any

from shmq.proxy.status import Code, ProxyError
from shmq.proxy.v2 import definition_pb2 as pb

PERM_READ, PERM_WRITE = 4, 2
MESSAGE_TYPE_ATTRIBUTE = "message.type"
_ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
_TYPES = {"NORMAL": (pb.NORMAL,), "FIFO": (pb.FIFO,), "DELAY": (pb.DELAY,),
          "TRANSACTION": (pb.TRANSACTION,), "MIXED": _ALL_TYPES,
          "UNSPECIFIED": (pb.MESSAGE_TYPE_UNSPECIFIED,)}  # fmt: skip


def topic_message_type(config: dict[str, Any]) -> str:
    """The topic's ``message.type`` attribute (RocketMQ 5's ``TopicMessageType``). shmq's
    topics carry no attributes (4.x's config), and a topic without one is MIXED here where
    RocketMQ takes NORMAL: else no FIFO, delay or transactional message could be sent to a
    topic created by 4.x tools."""
    attributes = config.get("attributes")
    value = attributes.get(MESSAGE_TYPE_ATTRIBUTE) if isinstance(attributes, dict) else None
    return value if value in _TYPES else "MIXED"


def accept_message_types(config: dict[str, Any]) -> tuple[int, ...]:
    return _TYPES[topic_message_type(config)]


def endpoints(host: str, port: int) -> pb.Endpoints:
    """This proxy's address as a client dials it (IPv4, IPv6 or a domain name)."""
    if host.replace(".", "").isdigit():
        scheme = pb.IPv4
    elif ":" in host:
        scheme = pb.IPv6
    else:
        scheme = pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def permission(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    return pb.WRITE if writable else pb.NONE


def route_queues(
    topic: pb.Resource, config: dict[str, Any], broker: pb.Broker
) -> list[pb.MessageQueue]:
    """The route's queues of one broker (RocketMQ's ``genMessageQueueFromQueueData``)."""
    read, write = int(config.get("readQueueNums", 0)), int(config.get("writeQueueNums", 0))
    perm = int(config.get("perm", 0))
    r = w = rw = n = 0
    if perm & PERM_READ and perm & PERM_WRITE:
        rw = min(read, write)
        r, w = read - rw, write - rw
    elif perm & PERM_READ:
        r = read
    elif perm & PERM_WRITE:
        w = write
    else:
        n = max(1, max(read, write))
    types = accept_message_types(config)
    queues: list[pb.MessageQueue] = []
    for count, kind in ((r, pb.READ), (w, pb.WRITE), (rw, pb.READ_WRITE), (n, pb.NONE)):
        for _ in range(count):
            queues.append(pb.MessageQueue(topic=topic, id=len(queues), permission=kind,
                                          broker=broker, accept_message_types=types))  # fmt: skip
    return queues


def assignments(
    topic: pb.Resource, config: dict[str, Any], broker: pb.Broker, orderly: bool
) -> list[pb.Assignment]:
    """QueryAssignment's answer: the broker's read queues for an orderly group, one queue
    with id -1 (all of them, the broker's POP picks) otherwise; FORBIDDEN when there is
    nothing to read."""
    read, perm = int(config.get("readQueueNums", 0)), int(config.get("perm", 0))
    if not perm & PERM_READ or read <= 0:
        raise ProxyError(Code.FORBIDDEN, "no readable queue")
    types = accept_message_types(config)
    kind = permission(perm)
    ids = range(read) if orderly else (-1,)
    return [pb.Assignment(message_queue=pb.MessageQueue(topic=topic, id=i, permission=kind,
                                                        broker=broker,
                                                        accept_message_types=types))
            for i in ids]  # fmt: skip
