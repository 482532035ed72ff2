"""TLS on a RemotingServer in this process: the first-byte rule of each mode, a handshake
that never comes, certificate checks, and the pipelined data path over TLS. The real
broker, namesrv, HA and gRPC ports over TLS: tests/test_tls_processes.py and
tests/proxy/test_proxy_tls.py."""

from __future__ import annotations

import queue
import socket
import threading
import time

import pytest

from shmq.errors import ConfigError, RemotingConnectError
from shmq.remoting.client import RemotingClient
from shmq.remoting.pipeline import PipelinedChannel
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.security.self_signed import self_signed
from shmq.remoting.security.tls import TlsOptions
from shmq.remoting.security.tls_server import TlsServerConfig
from shmq.remoting.server import RemotingServer


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> tuple[str, str]:
    """``(certificate, key)`` paths: a self-signed pair for 127.0.0.1, its own CA."""
    tmp = tmp_path_factory.mktemp("tls")
    cert, key = self_signed()
    (tmp / "cert.pem").write_bytes(cert)
    (tmp / "key.pem").write_bytes(key)
    return str(tmp / "cert.pem"), str(tmp / "key.pem")


def serve(mode: str, certs: tuple[str, str] | None, **kwargs) -> RemotingServer:
    tls = TlsServerConfig(mode, *(certs or ()), test_mode=certs is None)
    server = RemotingServer(tls=tls, **kwargs)
    server.register(RequestCode.HEART_BEAT, lambda req, conn: RemotingCommand.response_to(
        req, ResponseCode.SUCCESS, remark="tls" if conn.tls else "plain"))  # fmt: skip
    server.start()
    return server


def ask(client: RemotingClient, server: RemotingServer) -> str:
    """How the server's side of the connection speaks: "tls" or "plain"."""
    request = RemotingCommand.request(RequestCode.HEART_BEAT)
    response = client.invoke(server.address, request, timeout=5)
    assert response.code == ResponseCode.SUCCESS
    return response.remark


@pytest.mark.parametrize(
    ("mode", "plain", "tls"),
    [("permissive", "plain", "tls"), ("enforcing", None, "tls"), ("disabled", "plain", None)],
)  # fmt: skip
def test_each_mode_serves_what_its_first_byte_rule_says(certs, mode, plain, tls):
    server = serve(mode, certs)
    try:
        for options, expected in ((None, plain), (TlsOptions(ca_file=certs[0]), tls)):
            with RemotingClient(tls=options) as client:
                if expected is None:
                    with pytest.raises(RemotingConnectError):
                        ask(client, server)
                else:
                    assert ask(client, server) == expected
    finally:
        server.stop()


def test_test_mode_serves_tls_with_a_self_signed_certificate():
    server = serve("permissive", None)
    try:
        with RemotingClient(tls=True) as client:  # trusts any certificate
            assert ask(client, server) == "tls"
        with (
            RemotingClient(tls=TlsOptions(verify=True)) as client,  # the system's CAs
            pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"),
        ):
            ask(client, server)
    finally:
        server.stop()


def test_a_stalled_handshake_holds_no_one_and_is_closed_after_its_timeout(certs):
    server = serve("permissive", certs, handshake_timeout=0.5)
    try:
        silent = socket.create_connection(("127.0.0.1", server.port))
        stalled = socket.create_connection(("127.0.0.1", server.port))
        stalled.sendall(b"\x16\x03\x01")  # a TLS record's start, and then nothing
        with RemotingClient(tls=TlsOptions(ca_file=certs[0])) as client:
            assert ask(client, server) == "tls"
        with RemotingClient() as client:
            assert ask(client, server) == "plain"
        stalled.settimeout(5)
        started = time.monotonic()
        assert stalled.recv(100) == b""  # closed by the server
        assert time.monotonic() - started < 2
        silent.close()
        stalled.close()
    finally:
        server.stop()


REQUESTS = 200


def test_a_pipelined_channel_runs_many_requests_over_tls(certs):
    """The data path's non-blocking socket over TLS: frames larger than a TLS record, many
    in flight, completed by the reader thread."""
    server = serve("enforcing", certs)
    server.register(RequestCode.SEND_MESSAGE, lambda req, conn: RemotingCommand.response_to(
        req, ResponseCode.SUCCESS, body=req.body))  # fmt: skip
    channel = PipelinedChannel(server.address, tls=TlsOptions(ca_file=certs[0]))
    done = threading.Event()
    bodies: dict[int, bytes] = {}
    got: dict[int, bytes] = {}

    def answered(opaque: int):
        def callback(reply, error) -> None:
            assert error is None, error
            got[opaque] = reply.body
            if len(got) == REQUESTS:
                done.set()

        return callback

    try:
        for i in range(REQUESTS):
            opaque = channel.next_opaque()
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, body=bytes([i]) * (i * 200))
            request.opaque = opaque
            bodies[opaque] = request.body
            channel.send(opaque, request.encode(), answered(opaque), time.monotonic() + 10)
        assert done.wait(10)
        assert got == bodies
    finally:
        channel.close()
        server.stop()


def test_settings_that_cannot_serve_tls_are_refused():
    with pytest.raises(ConfigError, match=r"needs tls\.server\.certPath"):
        TlsServerConfig("enforcing", test_mode=False)
    with pytest.raises(ConfigError, match="not one of"):
        TlsServerConfig("sometimes")
    with pytest.raises(ConfigError, match="trustCertPath"):
        TlsServerConfig(need_client_auth="require")
    assert TlsServerConfig("disabled", test_mode=False).mode == "disabled"


def test_a_tls_config_file_overrides_the_keys(tmp_path, certs):
    path = tmp_path / "tls.properties"
    path.write_text(f"tls.server.mode=ENFORCING\ntls.server.certPath={certs[0]}\n"
                    f"tls.server.keyPath={certs[1]}\ntls.test.mode.enable=false\n")  # fmt: skip
    tls = TlsServerConfig().with_file(str(path))
    assert (tls.mode, tls.cert_path, tls.test_mode) == ("enforcing", certs[0], False)


def test_tls_connections_read_and_written_by_different_threads_at_once(certs):
    """Issue 52's fault: one SSL object used by two threads at once (a connection's reader
    and another thread's write, on both ends) closed TLS connections under pipelined bulk
    sends. Here the server answers from another thread (as its send-answer and pull-hold
    threads do) while it reads the next requests, and four client threads write while the
    channel's reader reads: every request is answered, with its own body."""
    answers: queue.SimpleQueue = queue.SimpleQueue()

    def answer_later(req, conn):
        answers.put((req, conn))
        return None

    def answerer():
        while (item := answers.get()) is not None:
            req, conn = item
            conn.send(RemotingCommand.response_to(req, ResponseCode.SUCCESS, body=req.body))

    server = serve("enforcing", certs)
    server.register(RequestCode.SEND_MESSAGE, answer_later)
    thread = threading.Thread(target=answerer, daemon=True)
    thread.start()
    channel = PipelinedChannel(server.address, tls=TlsOptions(ca_file=certs[0]))
    per_thread, senders = 400, 4
    got: dict[int, bytes] = {}
    sent: dict[int, bytes] = {}
    errors: list[BaseException] = []
    done = threading.Event()

    def callback_for(opaque: int):
        def callback(reply, error) -> None:
            if error is not None:
                errors.append(error)
                done.set()
                return
            got[opaque] = reply.body
            if len(got) == per_thread * senders:
                done.set()

        return callback

    def send(k: int) -> None:
        for i in range(per_thread):
            request = RemotingCommand.request(
                RequestCode.SEND_MESSAGE, body=bytes([k, i % 256]) * (1000 + 37 * i)
            )
            request.opaque = channel.next_opaque()
            sent[request.opaque] = request.body
            channel.send(request.opaque, request.encode(), callback_for(request.opaque),
                         time.monotonic() + 30)  # fmt: skip

    try:
        threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert done.wait(60)
        assert not errors, errors[0]
        assert got == sent
    finally:
        channel.close()
        server.stop()
        answers.put(None)
        thread.join(5)
