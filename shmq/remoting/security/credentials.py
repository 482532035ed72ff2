"""A client's ACL credentials, and the signing of its requests with them (RocketMQ's
``SessionCredentials`` and ``AclClientRPCHook``).

A broker with ACL on checks every request's ``AccessKey`` and ``Signature`` ext fields
(``signature``), so a client with credentials adds both to each request it sends, after
every other field is set and just before it is encoded: the signature covers the ext
fields and the body as they go on the wire. Answers are not signed, as RocketMQ signs
requests only.

The secret key is kept out of ``repr`` (and so out of logs, tracebacks and the reprs of
the clients and options that hold credentials); it leaves this object only inside a
signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shmq.errors import ConfigError
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.security.signature import ACCESS_KEY, SIGNATURE, sign


@dataclass(frozen=True)
class Credentials:
    """An access key and its secret key (``repr`` names the access key only). Clients take
    them as ``credentials=(access_key, secret_key)`` or as this type.

    Example::

        producer = shmq.Producer("Orders-P", namesrv, credentials=("orders", "12345678"))
        print(shmq.Credentials("orders", "12345678"))  # Credentials(access_key='orders')
    """

    access_key: str
    secret_key: str = field(repr=False)

    def __post_init__(self) -> None:
        for name in ("access_key", "secret_key"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ConfigError(f"credentials: the {name} must be a non-empty string")

    @classmethod
    def of(cls, value: Credentials | tuple[str, str] | None) -> Credentials | None:
        """A client's ``credentials=`` argument: ``(access_key, secret_key)``, a
        ``Credentials`` or None (no ACL)."""
        if value is None or isinstance(value, Credentials):
            return value
        if isinstance(value, tuple | list) and len(value) == 2:
            return cls(*value)
        raise ConfigError(
            f"credentials must be (access_key, secret_key) or None, not a {type(value).__name__}"
        )

    def signature(self, ext_fields: Mapping[str, str], body: bytes | memoryview | None) -> str:
        """The ``Signature`` of a request with ``ext_fields`` (its ``AccessKey`` among
        them) and ``body``."""
        return sign(ext_fields, body, self.secret_key)

    def sign(self, request: RemotingCommand) -> None:
        """Add ``AccessKey`` and ``Signature`` to ``request`` (in place; signing again
        after a change, or unchanged for a retry, gives the signature of what it is now)."""
        request.ext_fields[ACCESS_KEY] = self.access_key
        request.ext_fields[SIGNATURE] = self.signature(request.ext_fields, request.body)
