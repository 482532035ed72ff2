"""RocketMQ 5's gRPC statuses: the ``ProxyError`` every activity raises with a ``v2.Code``,
and the mapping of the broker's remoting response codes onto them (RocketMQ's
``ResponseBuilder``)."""

from __future__ import annotations

from shmq.proxy.v2 import definition_pb2 as pb
from shmq.remoting.codes import ResponseCode as Rc

Code = pb.Code

# ResponseBuilder's RESPONSE_CODE_MAPPING; any other remoting code is INTERNAL_SERVER_ERROR
_REMOTING_CODES = {
    Rc.SUCCESS: Code.OK,
    Rc.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    Rc.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    Rc.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    Rc.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    Rc.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
}


class ProxyError(Exception):
    """An RPC's outcome other than OK: its ``v2.Code`` and RocketMQ's message for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> pb.Status:
        return status(self.code, self.message)


def status(code: int, message: str | None = None) -> pb.Status:
    """A ``Status``; its message defaults to the code's name, as RocketMQ's does."""
    return pb.Status(code=code, message=Code.Name(code) if message is None else message)


OK = status(Code.OK)


def remoting_code(code: int) -> int:
    """The ``v2.Code`` RocketMQ's proxy answers for the broker's remoting ``code``."""
    return _REMOTING_CODES.get(code, Code.INTERNAL_SERVER_ERROR)


def overall(codes: list[int], empty: str) -> pb.Status:
    """The status of a batch whose entries answered ``codes`` (SendMessage, AckMessage):
    the one code they share, MULTIPLE_RESULTS when they differ, INTERNAL_SERVER_ERROR
    with ``empty`` when there is none."""
    distinct = set(codes)
    if not distinct:
        return status(Code.INTERNAL_SERVER_ERROR, empty)
    if len(distinct) > 1:
        return status(Code.MULTIPLE_RESULTS)
    return status(distinct.pop())
