"""TLS for remoting, the namesrv, HA and the gRPC proxy (RocketMQ's ``tls.*`` settings)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TlsOptions:
    """A client's TLS: ``tls=True`` on a shmq client is ``TlsOptions()`` (TLS, trusting the
    system's CAs unless ``ca_file`` is given); ``cert_file`` / ``key_file`` for mutual
    TLS; ``verify`` False trusts any server certificate (RocketMQ's default
    ``tls.client.authServer=false``)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = False
