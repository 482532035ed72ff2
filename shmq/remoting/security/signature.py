"""RocketMQ's ACL 1.0 request signature (``AclClientRPCHook`` / ``PlainAccessValidator``),
written by shmq's clients and checked by the broker and the gRPC proxy.

Remoting: every ext field but ``Signature``, sorted by key in Java's String order (UTF-16
code units: upper case before lower case), their values concatenated with nothing between,
then the body's bytes; the signature is Base64(HMAC-SHA1(secret key, that)). gRPC: the
``authorization`` header's hex HMAC-SHA1 of the ``x-mq-date-time`` header's value.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

ACCESS_KEY, SIGNATURE, SECURITY_TOKEN = "AccessKey", "Signature", "SecurityToken"


def _java_order(key: str) -> list[int]:
    """A key's UTF-16 code units: Java's ``String.compareTo`` order."""
    data = key.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def signed_content(ext_fields: Mapping[str, str], body: bytes | memoryview | None) -> bytes:
    """What the signature covers: the ext fields' values but ``Signature``'s, sorted by
    key, and the body."""
    keys = sorted((k for k in ext_fields if k != SIGNATURE), key=_java_order)
    text = "".join(str(ext_fields[k]) for k in keys).encode("utf-8", "surrogatepass")
    return text + bytes(body or b"")


def sign(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> str:
    """The ``Signature`` ext field of a request with ``ext_fields`` (which hold its
    ``AccessKey``) and ``body``."""
    mac = hmac.new(secret_key.encode("utf-8"), signed_content(ext_fields, body), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def verify(ext_fields: Mapping[str, str], body: bytes | memoryview | None, secret_key: str) -> bool:
    """Whether the request's ``Signature`` is ``secret_key``'s (constant time)."""
    given = ext_fields.get(SIGNATURE)
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"),
                               sign(ext_fields, body, secret_key).encode())  # fmt: skip


def grpc_signature(date_time: str, secret_key: str) -> str:
    """The hex HMAC-SHA1 of ``x-mq-date-time`` a RocketMQ 5 client puts in its
    ``authorization`` header (upper case, as the Java SDK sends it)."""
    mac = hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1)
    return mac.hexdigest().upper()
