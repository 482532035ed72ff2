"""One exception tree for shmq. Every message names the bad value and the limit it broke.

This module imports nothing of shmq's, so every other module can raise from it. An error
that crosses a module boundary is defined here; a control-flow signal that never leaves its
module may stay private there, derived from ``ShmqError`` and saying so.
"""

from __future__ import annotations

from typing import Any


class ShmqError(Exception):
    """Base of every error shmq raises on purpose."""


class ConfigError(ShmqError, ValueError):
    """A configuration key or value is unknown or out of range."""


class InvalidMessageError(ShmqError, ValueError):
    """A message, topic or property is not acceptable; nothing was stored.

    ``status`` is the name of the store status RocketMQ would answer with
    (``MESSAGE_ILLEGAL`` or ``PROPERTIES_SIZE_EXCEEDED``).
    """

    def __init__(self, message: str, status: str = "MESSAGE_ILLEGAL") -> None:
        super().__init__(message)
        self.status = status


class FilterExpressionError(ShmqError, ValueError):
    """A SQL92 filter expression (``MessageSelector.by_sql``) that does not compile: the
    message names the 1-based ``position`` in the expression and the ``reason``, so a
    broker can answer SUBSCRIPTION_PARSE_FAILED with both."""

    def __init__(self, reason: str, position: int) -> None:
        super().__init__(f"{reason} at position {position}")
        self.reason = reason
        self.position = position


class InvalidTopicError(InvalidMessageError):
    """A topic name breaks RocketMQ's rule ``^[%|a-zA-Z0-9_-]{1,127}$``."""


class MessageTooLargeError(InvalidMessageError):
    """A body is empty or longer than ``maxMessageSize``."""


class InvalidPropertyError(InvalidMessageError):
    """A property name is reserved, or a name or value is empty or holds a separator."""


class BatchBodyError(InvalidMessageError):
    """A batch body (RocketMQ's ``MessageBatch`` encoding) that does not decode; the message
    names the entry and the rule it breaks."""


class InvalidMessageIdError(ShmqError, ValueError):
    """A message id string is not 32 (IPv4) or 56 (IPv6) hex digits."""


class StoreError(ShmqError):
    """The store cannot do what was asked (closed, locked, unreadable layout)."""


class StoreLockedError(StoreError):
    """Another process holds the store's ``lock`` file."""


class StoreClosedError(StoreError):
    """The store was closed."""


class CorruptStoreError(StoreError):
    """A store file has the wrong size or shape and cannot be used safely."""


class DiskFullError(StoreError):
    """A store file could not be given real disk blocks (``posix_fallocate`` failed with
    ENOSPC or EDQUOT): nothing is written through a mapping that would fault with SIGBUS."""


class FlushError(StoreError):
    """msync/fsync failed: data is not known to be durable."""


class DataLossError(StoreError):
    """Offsets a query needs are gone (cleanup deleted them, or the queue was reset): what
    the Spark source raises unless its option ``failOnDataLoss`` is false."""


class RemotingError(ShmqError):
    """The control plane failed: a connection, a frame or a request."""


class RemotingConnectError(RemotingError, ConnectionError):
    """No connection to a namesrv or broker address (nothing listens, or it went away)."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """A control-plane request got no response within its timeout."""


class RemotingFrameError(RemotingError):
    """A control-plane frame is malformed or larger than the frame limit."""


class RemotingHeaderError(RemotingFrameError):
    """A request frame malformed only after its code, opaque and flag were read. Its length
    was sound, so the stream is still in step: the server answers ``request`` (the
    ``RemotingCommand`` decoded so far, enough for a response) with SYSTEM_ERROR and keeps
    the connection."""

    def __init__(self, reason: str, request: Any) -> None:
        super().__init__(reason)
        self.request = request


class ResponseError(RemotingError):
    """A namesrv or broker answered a request with an error code (RocketMQ's
    ``MQBrokerException``); ``code`` is the ``ResponseCode`` and ``remark`` its reason."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"{remark} (response code {code})")
        self.code = code
        self.remark = remark


class ClientError(ShmqError):
    """A client could not do what was asked (RocketMQ's ``MQClientException``)."""


class NoRouteError(ClientError):
    """No namesrv knows the topic (and no broker auto-creates it)."""


class SendError(ClientError):
    """The broker rejected a message (an ``AttemptError``'s ``reason`` says why) or never
    answered it in time."""


class AttemptError(SendError):
    """One attempt of a send failed at a broker: rejected (``reason``, the ring's rejection
    reason, 0 for none), unreachable, or gone. ``retryable`` says whether another attempt
    may succeed: a send raises this one when its attempt failed for good, and retries
    otherwise, the last attempt's error then the cause of a ``SendError`` naming them all."""

    def __init__(self, message: str, *, retryable: bool, reason: int = 0) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.reason = reason


class SendTimeoutError(SendError, TimeoutError):
    """No answer within the send timeout (the broker or its writer may be down)."""


class RequestTimeoutError(ClientError, TimeoutError):
    """A request was sent but no reply came within its timeout (RocketMQ's
    ``RequestTimeoutException``)."""


class HAFrameError(ShmqError):
    """Bytes from an HA peer (a master's transfer header, a slave's offset report) that
    break RocketMQ's HA wire format; the agent reading them ends the connection."""


class EpochNotReadyError(ShmqError):
    """The namesrv's controller cannot decide a broker's role yet: the epoch the broker
    must truncate to has not reported its start offset yet; its registration is answered
    SYSTEM_ERROR until the master reports it."""


class BodyDecompressionError(ShmqError):
    """A stored body marked compressed (sysFlag COMPRESSED) that does not decompress with
    the algorithm its sysFlag names, or whose algorithm's library is not installed. The
    message names the message; the stored bytes stay readable (``MessageExt.stored_body``,
    ``MessageBatch.errors``)."""
