"""TLS on a server's port, RocketMQ's way (``TlsSystemConfig``, ``TlsHelper``,
``NettyRemotingServer``): one port serves TLS and plain TCP alike, told apart by a new
connection's first byte. A TLS ClientHello starts with the handshake record type 0x16,
which no remoting frame does (its first byte is the high byte of a length far below
0x16000000), so:

| first byte | ``disabled`` | ``permissive`` (the default) | ``enforcing`` |
| --- | --- | --- | --- |
| 0x16 | closed | TLS | TLS |
| any other | plain | plain | closed |

The certificate is ``certPath`` / ``keyPath`` (PEM, the key optionally encrypted with
``keyPassword``), or, in test mode (RocketMQ's default) without them, a self-signed one made
when the first TLS client arrives, so the default permissive server costs nothing until
then and needs no setup. Client certificates are asked for per ``needClientAuth`` and
checked against ``trustCertPath``: Python's ssl cannot take a client certificate without
checking it, as RocketMQ's ``tls.server.authClient=false`` does, so asking for one needs
a CA to check it with.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass

from shmq.errors import ConfigError, RemotingConnectError
from shmq.java_properties import parse_properties

DISABLED, PERMISSIVE, ENFORCING = "disabled", "permissive", "enforcing"
MODES = (DISABLED, PERMISSIVE, ENFORCING)
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
TLS_HANDSHAKE_RECORD = 0x16
HANDSHAKE_TIMEOUT_S = 10.0  # Netty SslHandler's default handshake timeout

# RocketMQ's property names (``tls.config.file`` holds them) → ``TlsServerConfig`` fields
PROPERTIES = {
    "tls.server.mode": "mode",
    "tls.server.certPath": "cert_path",
    "tls.server.keyPath": "key_path",
    "tls.server.keyPassword": "key_password",
    "tls.server.need.client.auth": "need_client_auth",
    "tls.server.trustCertPath": "trust_cert_path",
    "tls.test.mode.enable": "test_mode",
}


class TlsRefused(RemotingConnectError):
    """A connection the server's TLS mode does not serve (its reason says which rule)."""


@dataclass(frozen=True)
class TlsServerConfig:
    """A server's ``tls.server.*`` settings (RocketMQ's defaults)."""

    mode: str = PERMISSIVE
    cert_path: str = ""
    key_path: str = ""
    key_password: str = ""
    need_client_auth: str = "none"
    trust_cert_path: str = ""
    test_mode: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", self.mode.lower())
        object.__setattr__(self, "need_client_auth", self.need_client_auth.lower())
        if self.mode not in MODES:
            raise ConfigError(f"tls.server.mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.need_client_auth not in CLIENT_AUTH:
            raise ConfigError(f"tls.server.need.client.auth {self.need_client_auth!r} is not "
                              f"one of {', '.join(CLIENT_AUTH)}")  # fmt: skip
        if bool(self.cert_path) != bool(self.key_path):
            raise ConfigError("tls.server.certPath and tls.server.keyPath go together")
        if self.mode != DISABLED and not self.cert_path and not self.test_mode:
            raise ConfigError(f"tls.server.mode {self.mode} needs tls.server.certPath and "
                              "tls.server.keyPath, or tls.test.mode.enable (a self-signed "
                              "certificate)")  # fmt: skip
        if self.need_client_auth != "none" and not self.trust_cert_path:
            raise ConfigError("tls.server.need.client.auth needs tls.server.trustCertPath: "
                              "the CA client certificates are checked against")  # fmt: skip

    def with_file(self, path: str) -> TlsServerConfig:
        """These settings overridden by the ``tls.*`` properties of ``path`` (RocketMQ's
        ``tls.config.file``: the file's values win); ``ConfigError`` if it cannot be read."""
        try:
            with open(path, encoding="utf-8") as f:
                values = parse_properties(f.read())
        except OSError as exc:
            raise ConfigError(f"tls.config.file {path}: {exc.strerror or exc}") from exc
        changes: dict[str, str | bool] = {}
        for key, name in PROPERTIES.items():
            if key in values:
                value = values[key].strip()
                changes[name] = value.lower() == "true" if name == "test_mode" else value
        return dataclasses.replace(self, **changes)

    def key_and_cert(self) -> tuple[bytes, bytes]:
        """``(private key, certificate chain)`` as PEM, the key unencrypted (as gRPC's server
        credentials take it): the configured files, or a new self-signed pair."""
        if not self.cert_path:
            from shmq.remoting.security.self_signed import self_signed  # cryptography: only for TLS

            cert, key = self_signed()
            return key, cert
        with open(self.cert_path, "rb") as f:
            cert = f.read()
        with open(self.key_path, "rb") as f:
            key = f.read()
        if self.key_password:
            from cryptography.hazmat.primitives import serialization

            private = serialization.load_pem_private_key(key, self.key_password.encode())
            key = private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        return key, cert

    def context(self) -> ssl.SSLContext:
        """The server's SSL context; ``ConfigError`` naming what does not load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            if self.cert_path:
                ctx.load_cert_chain(self.cert_path, self.key_path, self.key_password or None)
            else:
                _load_pem(ctx, *self.key_and_cert())
            ctx.verify_mode = CLIENT_AUTH[self.need_client_auth]
            if self.trust_cert_path:
                ctx.load_verify_locations(cafile=self.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"TLS certificate or key does not load: {exc}") from exc
        return ctx


def _load_pem(ctx: ssl.SSLContext, key: bytes, cert: bytes) -> None:
    """Load an in-memory pair: ``load_cert_chain`` reads files only, so they are written to
    a private temporary directory for the call."""
    with tempfile.TemporaryDirectory(prefix="shmq-tls-") as directory:
        paths = []
        for name, pem in (("cert.pem", cert), ("key.pem", key)):
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(pem)
            paths.append(path)
        ctx.load_cert_chain(*paths)


class TlsGate:
    """A server's door: which connections it takes, and TLS for those that ask for it. The
    SSL context is built once, at the first TLS connection (``check`` builds it at start
    when a certificate is configured, so a wrong path fails the start, not a client)."""

    def __init__(self, config: TlsServerConfig, handshake_timeout: float = HANDSHAKE_TIMEOUT_S):
        self.config = config
        self.mode = config.mode
        self.handshake_timeout = handshake_timeout
        self._context: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        if self.mode != DISABLED and self.config.cert_path:
            self.context()

    def context(self) -> ssl.SSLContext:
        with self._lock:
            if self._context is None:
                self._context = self.config.context()
            return self._context

    def wants_tls(self, first: int) -> bool:
        """Whether a connection whose first byte is ``first`` speaks TLS; ``TlsRefused``
        when the mode does not serve it."""
        if first == TLS_HANDSHAKE_RECORD:
            if self.mode == DISABLED:
                raise TlsRefused("it starts a TLS handshake and TLS is disabled")
            return True
        if self.mode == ENFORCING:
            raise TlsRefused("it speaks plain TCP and TLS is enforced")
        return False

    def wrap(self, sock: socket.socket) -> ssl.SSLSocket:
        """``sock`` as the server's side of TLS, the handshake not done yet (a non-blocking
        caller drives it with ``do_handshake``)."""
        return self.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
