"""TLS for remoting, the namesrv, HA and the gRPC proxy (RocketMQ's ``tls.*`` settings): the
client's side. Every client socket of shmq (control, duplex, pipelined data path, HA) is
opened by ``open_connection``, so TLS is one option of one function, not of four copies.

The server's side (modes, the first-byte rule, certificates) is ``tls_server``.
"""

from __future__ import annotations

import functools
import socket
import ssl
from dataclasses import dataclass

from shmq.remoting.security.tls_socket import SharedTlsSocket

# What a non-blocking read or write raises when it would wait: a plain socket's
# BlockingIOError, or an SSL socket's wish to read or write first.
WOULD_BLOCK = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


@dataclass(frozen=True)
class TlsOptions:
    """A client's TLS: ``tls=True`` on a shmq client is ``TlsOptions()`` (TLS, trusting the
    system's CAs unless ``ca_file`` is given); ``cert_file`` / ``key_file`` for mutual
    TLS; ``verify`` False trusts any server certificate (RocketMQ's default
    ``tls.client.authServer=false``).

    Example::

        admin = shmq.Admin(namesrv, tls=shmq.TlsOptions(ca_file="/etc/shmq/ca.pem"))
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = False


def tls_options(tls: bool | TlsOptions | None) -> TlsOptions | None:
    """A client's ``tls=`` argument as options: ``True`` is ``TlsOptions()``, ``False`` /
    ``None`` plain TCP."""
    if tls is True:
        return TlsOptions()
    return tls or None


@functools.lru_cache(maxsize=16)
def client_context(options: TlsOptions) -> ssl.SSLContext:
    """The SSL context of ``options`` (one per options: contexts are costly to build and
    safe to share). The server's certificate is checked, name included, when ``verify`` is
    set or a ``ca_file`` is given (a CA is only of use to check with), against ``ca_file``
    or else the system's CAs; otherwise any certificate is taken, as RocketMQ's clients do
    by default."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.verify or options.ca_file:
        if options.ca_file:
            ctx.load_verify_locations(cafile=options.ca_file)
        else:
            ctx.load_default_certs()
    else:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if options.cert_file:
        ctx.load_cert_chain(options.cert_file, options.key_file)
    return ctx


def open_connection(
    host: str, port: int, timeout: float, tls: TlsOptions | None = None, *, shared: bool = False
) -> socket.socket | SharedTlsSocket:
    """A connected TCP socket to ``host:port`` with Nagle off, TLS-wrapped and handshaken
    when ``tls`` is given; the connect and the handshake each within ``timeout`` s, after
    which the socket keeps that timeout (callers set their own). ``shared``: a TLS socket
    one thread reads while others write (``SharedTlsSocket``). ``OSError`` (including
    ``ssl.SSLError``, e.g. a refused certificate) when it cannot."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = client_context(tls).wrap_socket(sock, server_hostname=host)
            if shared:
                return SharedTlsSocket(sock)
    except BaseException:
        sock.close()
        raise
    return sock


def tls_pending(sock: socket.socket | SharedTlsSocket) -> int:
    """Bytes an SSL socket already decrypted and holds (0 for a plain socket): a ``select``
    on the socket does not see them, so a non-blocking reader reads again while any wait."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket | SharedTlsSocket) else 0
