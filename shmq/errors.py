"""One exception tree for shmq. Every message names the bad value and the limit it broke."""

from __future__ import annotations


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


class InvalidTopicError(InvalidMessageError):
    """A topic name breaks RocketMQ's rule ``^[%|a-zA-Z0-9_-]{1,127}$``."""


class MessageTooLargeError(InvalidMessageError):
    """A body is empty or longer than ``maxMessageSize``."""


class InvalidPropertyError(InvalidMessageError):
    """A property name is reserved, or a name or value is empty or holds a separator."""


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


class RemotingError(ShmqError):
    """The control plane failed: a connection, a frame or a request."""


class RemotingConnectError(RemotingError, ConnectionError):
    """No connection to a namesrv or broker address (nothing listens, or it went away)."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """A control-plane request got no response within its timeout."""


class RemotingFrameError(RemotingError):
    """A control-plane frame is malformed or larger than the frame limit."""


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
    """The broker rejected a message (``reason`` says why) or never answered it in time."""


class SendTimeoutError(SendError, TimeoutError):
    """No answer within the send timeout (the broker or its writer may be down)."""


class RequestTimeoutError(ClientError, TimeoutError):
    """A request was sent but no reply came within its timeout (RocketMQ's
    ``RequestTimeoutException``)."""
