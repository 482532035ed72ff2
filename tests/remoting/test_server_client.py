"""RemotingServer and RemotingClient over real loopback sockets."""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import struct
import threading
import time

import pytest
from waiting import wait_for

from shmq.errors import (
    ConfigError,
    RemotingConnectError,
    RemotingError,
    RemotingFrameError,
    RemotingTimeoutError,
    ResponseError,
)
from shmq.remoting.client import RemotingClient
from shmq.remoting.frames import read_frame
from shmq.remoting.protocol import (
    MAX_FRAME_SIZE,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from shmq.remoting.server import Connection, RemotingServer

# Test-only request codes, outside RocketMQ's and shmq's ranges (RocketMQ 5's controller
# has 1001-1011).
ECHO = 7001
BUSY = 7002
BAD_VALUE = 7003
BUG = 7004
SLOW = 7005
SILENT = 7006
HANG_UP = 7007
PUSH = 7008
ONEWAY = RequestCode.HEART_BEAT


class Recorder:
    def __init__(self) -> None:
        self.oneway: queue.Queue[RemotingCommand] = queue.Queue()
        self.disconnected: queue.Queue[Connection] = queue.Queue()


def echo(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    return RemotingCommand.response_to(
        req, ext_fields={**req.ext_fields, "conn": conn.id}, body=req.body[::-1]
    )


def busy(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    raise ResponseError(ResponseCode.SYSTEM_BUSY, "too busy now")


def bad_value(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    raise ValueError("queueId 99 is out of range")


def bug(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    raise KeyError("oops")


def slow(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    time.sleep(float(req.ext("sleep")))
    return RemotingCommand.response_to(req, body=b"late")


def hang_up(req: RemotingCommand, conn: Connection) -> None:
    conn.close()


def push(req: RemotingCommand, conn: Connection) -> RemotingCommand:
    conn.send(RemotingCommand.request(RequestCode.WATCH_QUEUES, {"x": 1}, oneway=True))
    conn.send(RemotingCommand.response_to(RemotingCommand(ECHO, opaque=req.opaque + 10**6)))
    return RemotingCommand.response_to(req, body=b"mine")


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def server(rec):
    srv = RemotingServer(port=0, name="test", max_frame=64 * 1024)
    handlers = {ECHO: echo, BUSY: busy, BAD_VALUE: bad_value, BUG: bug, SLOW: slow}
    handlers |= {HANG_UP: hang_up, PUSH: push}
    for code, handler in handlers.items():
        srv.register(code, handler)
    srv.register(SILENT, lambda req, conn: None)

    def oneway(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        rec.oneway.put(req)
        return RemotingCommand.response_to(req, body=b"must not be sent")

    srv.register(ONEWAY, oneway)
    srv.on_disconnect(rec.disconnected.put)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client():
    with RemotingClient(default_timeout=2.0) as c:
        yield c


def call(client: RemotingClient, server: RemotingServer, code: int, **ext) -> RemotingCommand:
    return client.invoke(server.address, RemotingCommand.request(code, ext, b"abc"))


def test_dispatch_and_address(server, client):
    assert server.port > 0 and server.address == f"127.0.0.1:{server.port}"
    resp = call(client, server, ECHO, topic="Tópico")
    assert resp.code == ResponseCode.SUCCESS and resp.is_response
    assert resp.body == b"cba" and resp.ext_fields["topic"] == "Tópico"
    again = call(client, server, ECHO)
    assert again.ext_fields["conn"] == resp.ext_fields["conn"]  # pooled connection


def test_unknown_code(server, client):
    resp = call(client, server, 999)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert "999" in resp.remark


def test_handler_errors_become_responses(server, client, caplog):
    resp = call(client, server, BUSY)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_BUSY, "too busy now")
    resp = call(client, server, BAD_VALUE)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "queueId 99 is out of range")
    with caplog.at_level(logging.ERROR, logger="shmq.remoting.server"):
        resp = call(client, server, BUG)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "oops" in resp.remark
    assert any(r.exc_info for r in caplog.records)
    assert call(client, server, ECHO).code == ResponseCode.SUCCESS  # still serving


def test_invoke_json(server, client):
    with pytest.raises(ResponseError, match="too busy now") as info:
        client.invoke_json(server.address, BUSY)
    assert info.value.code == ResponseCode.SYSTEM_BUSY
    resp, body = client.invoke_json(server.address, ECHO, {"a": 1}, body_obj="ab")
    assert body == "ba" and resp.ext_fields["a"] == "1"  # the echo reverses '"ab"'
    resp, body = client.invoke_json(server.address, ECHO)
    assert body is None


def test_oneway_gets_no_response(server, client, rec):
    client.invoke_oneway(server.address, RemotingCommand.request(ONEWAY, {"n": 1}))
    assert rec.oneway.get(timeout=2).ext_fields == {"n": "1"}
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as raw:
        raw.sendall(RemotingCommand.request(ONEWAY, oneway=True).encode())
        raw.sendall(RemotingCommand.request(SILENT).encode())
        req = RemotingCommand.request(ECHO)
        raw.sendall(req.encode())
        first = read_frame(raw)
        assert first is not None and first.opaque == req.opaque  # nothing sent before it


def test_server_push_and_stray_frames_are_skipped(server, client):
    resp = call(client, server, PUSH)
    assert resp.body == b"mine"
    assert call(client, server, ECHO).body == b"cba"


def _expect_disconnect(sock: socket.socket) -> None:
    sock.settimeout(2.0)
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    assert data == b""


def _framed(serialize_type: int, header: bytes) -> bytes:
    return struct.pack(">II", 4 + len(header), serialize_type << 24 | len(header)) + header


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "frame length"),
        (struct.pack(">I", MAX_FRAME_SIZE), "frame length"),
        (struct.pack(">I", 100) + b"\x00" * 10, "middle of a frame"),
        (struct.pack(">I", 8) + struct.pack(">I", 4) + b"nope", "not UTF-8 JSON"),
        (RemotingCommand(ECHO, flag=1).encode(), "response frame"),
        (_framed(0, b'{"code":7001,"opaque":3,"flag":1,"extFields":[]}'), "'extFields'"),
    ],
    ids=["garbage", "oversized", "truncated", "bad-header", "response", "bad-response"],
)
def test_bad_client_is_disconnected_good_one_keeps_working(
    server, client, rec, caplog, payload, reason
):
    assert call(client, server, ECHO).code == ResponseCode.SUCCESS
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as bad:
        peer = f"127.0.0.1:{bad.getsockname()[1]}"
        with caplog.at_level(logging.WARNING, logger="shmq.remoting.server"):
            bad.sendall(payload)
            with contextlib.suppress(OSError):  # the server may have reset it already
                bad.shutdown(socket.SHUT_WR)
            _expect_disconnect(bad)
            wait_for(lambda: any(peer in r.getMessage() for r in caplog.records),
                     what=f"a warning naming {peer}")  # fmt: skip
    warnings = [r for r in caplog.records if peer in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert reason in warnings[0].getMessage()
    assert call(client, server, ECHO).code == ResponseCode.SUCCESS


def test_malformed_header_past_the_opaque_is_answered_and_the_connection_kept(server, caplog):
    bad_json = _framed(0, b'{"code":7001,"opaque":41,"flag":0,"extFields":["queueId",0]}')
    bad_oneway = _framed(0, b'{"code":7001,"opaque":42,"flag":2,"extFields":"x"}')
    # code ECHO, language JAVA, version 0, opaque 43, flag 0, then a remark longer than all
    bad_rocketmq = _framed(1, struct.pack(">hbhiii", ECHO, 0, 0, 43, 0, 1000) + b"short")
    good = RemotingCommand.request(ECHO, {"queueId": 0}, b"abc", serialize_type=1)
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=2) as raw,
        caplog.at_level(logging.WARNING, logger="shmq.remoting.server"),
    ):
        raw.sendall(bad_json + bad_oneway + bad_rocketmq + good.encode())
        answers = [read_frame(raw) for _ in range(3)]
    first, second, third = answers
    assert first is not None and second is not None and third is not None
    assert (first.opaque, first.code, first.serialize_type) == (41, ResponseCode.SYSTEM_ERROR, 0)
    assert "'extFields'" in first.remark
    assert (second.opaque, second.code, second.serialize_type) == (43, 1, 1)
    assert "the remark needs 1000 bytes" in second.remark
    assert (third.opaque, third.code, third.body) == (good.opaque, ResponseCode.SUCCESS, b"cba")
    assert third.serialize_type == 1 and third.ext_fields["queueId"] == "0"
    messages = [r.getMessage() for r in caplog.records]
    assert sum("answered SYSTEM_ERROR" in m for m in messages) == 2
    assert sum("dropped (oneway)" in m for m in messages) == 1


def test_timeout_then_next_invoke_gets_its_own_response(server, client):
    start = time.monotonic()
    with pytest.raises(RemotingTimeoutError) as info:
        client.invoke(server.address, RemotingCommand.request(SLOW, {"sleep": 0.4}), timeout=0.1)
    assert time.monotonic() - start < 0.35
    text = str(info.value)
    assert server.address in text and "request code 7005" in text
    assert "0.1 s" in text
    resp = client.invoke(server.address, RemotingCommand.request(ECHO, body=b"12"), timeout=2)
    assert resp.body == b"21"


def test_connection_refused():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with RemotingClient() as c, pytest.raises(RemotingConnectError) as info:
        c.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO))
    assert str(info.value) == f"cannot connect to 127.0.0.1:{port}: Connection refused"


@pytest.mark.parametrize("addr", ["127.0.0.1", "127.0.0.1:", ":9876", "h:0", "h:70000", "h:x"])
def test_bad_address_is_config_error(client, addr):
    with pytest.raises(ConfigError, match="host:port"):
        client.invoke(addr, RemotingCommand.request(ECHO))


def test_connection_lost_mid_request_then_reconnect(server, client, rec):
    with pytest.raises(RemotingConnectError, match="closed while waiting"):
        call(client, server, HANG_UP)
    assert call(client, server, ECHO).code == ResponseCode.SUCCESS


def test_concurrent_invokes_get_their_own_responses(server):
    errors: list[BaseException] = []
    with RemotingClient(default_timeout=5.0) as shared:

        def worker(n: int) -> None:
            try:
                for i in range(25):
                    body = f"{n}-{i}".encode()
                    resp = shared.invoke(server.address, RemotingCommand.request(ECHO, body=body))
                    assert resp.body == body[::-1]
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert not errors


def test_on_disconnect_called_once_per_connection(server, rec):
    with RemotingClient() as c:
        conn_id = int(c.invoke(server.address, RemotingCommand.request(ECHO)).ext_fields["conn"])
    closed = rec.disconnected.get(timeout=2)
    assert closed.id == conn_id and closed.peer.startswith("127.0.0.1:")
    time.sleep(0.1)  # a test of absence: a second call would come by now
    assert rec.disconnected.empty()


def test_malformed_response_is_a_frame_error():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            read_frame(conn)
            conn.sendall(struct.pack(">I", 6) + b"\x00\x00\x00\x02ab")
            time.sleep(0.2)  # open a while: the client fails on the frame, not on a close

    t = threading.Thread(target=serve)
    t.start()
    try:
        with RemotingClient() as c, pytest.raises(RemotingFrameError, match="JSON"):
            c.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO))
    finally:
        t.join(2)
        listener.close()


def test_stop_closes_connections_and_is_idempotent(server, client):
    assert call(client, server, ECHO).code == ResponseCode.SUCCESS
    start = time.monotonic()
    server.stop()
    server.stop()
    assert time.monotonic() - start < 1.5
    with pytest.raises(RemotingConnectError):
        call(client, server, ECHO)


def test_bind_failure_is_a_clear_error(server):
    other = RemotingServer(port=server.port, name="second")
    with pytest.raises(RemotingError, match=rf"cannot listen on 127.0.0.1:{server.port}"):
        other.start()


def test_a_duplex_oneway_request_reaches_the_server_which_pushes_back_by_connection_id(server, rec):
    """A transaction producer's path: oneway requests out, the server's pushes back on the
    same connection, found by its id (``RemotingServer.connection``)."""
    from shmq.remoting.duplex import DuplexChannel

    pushed: queue.Queue[RemotingCommand] = queue.Queue()
    channel = DuplexChannel(server.address, pushed.put)
    try:
        conn_id = int(channel.invoke(RemotingCommand.request(ECHO)).ext_fields["conn"])
        for n in range(50):  # queued: written by the channel's writer, in order
            channel.send_soon(RemotingCommand.request(ONEWAY, {"n": n}))
        assert [rec.oneway.get(timeout=2).ext_fields for _ in range(50)] == [
            {"n": str(n)} for n in range(50)]  # fmt: skip
        channel.send_soon(RemotingCommand.request(ONEWAY, {"n": "last"}))
        channel.invoke(RemotingCommand.request(ECHO))  # writes what is queued before it
        assert rec.oneway.get_nowait().ext_fields == {"n": "last"}
        conn = server.connection(conn_id)
        assert conn is not None and server.connection(conn_id + 1000) is None
        conn.send(RemotingCommand.request(RequestCode.CHECK_TRANSACTION_STATE, {"x": 1},
                                          oneway=True))  # fmt: skip
        assert pushed.get(timeout=2).code == RequestCode.CHECK_TRANSACTION_STATE
    finally:
        channel.close()
    rec.disconnected.get(timeout=2)
    assert server.connection(conn_id) is None


def test_the_server_calls_a_duplex_client_and_gets_its_answer(server, rec):
    """``Connection.invoke`` (RocketMQ's ``Broker2Client.callClient``): the client's reader
    answers what its handler returns, REQUEST_CODE_NOT_SUPPORTED for a request it does not
    serve; an answer that comes after the caller gave up is dropped, the connection kept."""
    from shmq.remoting.duplex import DuplexChannel

    release = threading.Event()

    def on_request(req: RemotingCommand) -> RemotingCommand | None:
        if req.code != RequestCode.GET_CONSUMER_RUNNING_INFO:
            return None
        if req.ext_fields.get("slow"):
            release.wait(5)
        return RemotingCommand.response_to(req, body=b"info " + req.ext("n").encode())

    def ask(n: int, timeout: float = 2.0, **ext) -> RemotingCommand:
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"n": n, **ext})
        return conn.invoke(request, timeout)

    channel = DuplexChannel(server.address, on_request)
    try:
        conn = server.connection(
            int(channel.invoke(RemotingCommand.request(ECHO)).ext_fields["conn"])
        )
        answer = ask(1)
        assert (answer.is_response, answer.code, answer.body) == (True, 0, b"info 1")
        other = conn.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC), 2.0)
        assert other.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        late = r"GET_CONSUMER_RUNNING_INFO\(307\) within 0\.2 s"
        with pytest.raises(RemotingTimeoutError, match=late):
            ask(2, 0.2, slow="yes")
        release.set()  # its late answer comes first, and is dropped
        assert ask(3).body == b"info 3"
        assert channel.invoke(RemotingCommand.request(ECHO)).code == ResponseCode.SUCCESS
        assert rec.disconnected.empty()
    finally:
        channel.close()
    rec.disconnected.get(timeout=2)
    with pytest.raises(RemotingConnectError, match="is closed"):
        ask(4)


def test_a_duplex_client_answers_later_through_a_future(server, rec):
    """A handler that takes time returns a ``Future``: the reader goes on (other calls are
    answered meanwhile) and the response goes out when the future is done; a failed
    future is answered SYSTEM_ERROR."""
    from concurrent.futures import Future

    from shmq.remoting.duplex import DuplexChannel

    pending: dict[str, Future] = {}
    asked: dict[str, RemotingCommand] = {}

    def on_request(req: RemotingCommand) -> RemotingCommand | Future:
        if req.ext_fields.get("later"):
            asked[req.ext("later")] = req
            pending[req.ext("later")] = future = Future()
            return future
        return RemotingCommand.response_to(req, body=b"now")

    channel = DuplexChannel(server.address, on_request)
    try:
        conn = server.connection(
            int(channel.invoke(RemotingCommand.request(ECHO)).ext_fields["conn"])
        )
        code = RequestCode.CONSUME_MESSAGE_DIRECTLY
        answers: dict[str, RemotingCommand] = {}

        def ask(name: str) -> None:
            answers[name] = conn.invoke(RemotingCommand.request(code, {"later": name}), 5.0)

        askers = [threading.Thread(target=ask, args=(n,)) for n in ("ok", "bad")]
        for t in askers:
            t.start()
        wait_for(lambda: len(pending) == 2, what="both requests pending in the listener")
        assert conn.invoke(RemotingCommand.request(code), 2.0).body == b"now"  # not blocked
        pending["ok"].set_result(RemotingCommand.response_to(asked["ok"], body=b"done"))
        pending["bad"].set_exception(ValueError("the listener broke"))
        for t in askers:
            t.join(5)
    finally:
        channel.close()
    assert answers["ok"].code == ResponseCode.SUCCESS and answers["ok"].body == b"done"
    assert answers["bad"].code == ResponseCode.SYSTEM_ERROR
    assert "the listener broke" in answers["bad"].remark


def test_a_connection_paused_for_its_unhandled_requests_is_read_again_once_they_drain():
    """More requests pipelined than a connection's inbox holds (256): the server stops
    reading it, and reads it again as its worker drains them (the crossing was once missed,
    and the connection was never read again: check-back answers never arrived)."""

    srv = RemotingServer(port=0, name="inbox", workers=1)
    srv.register(ECHO, echo)
    srv.start()
    n = 20_000  # more than one read takes: reading must go on after the pause
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            frames = b"".join(
                RemotingCommand(ECHO, opaque=i, body=str(i).encode()).encode() for i in range(n)
            )
            sender = threading.Thread(target=sock.sendall, args=(frames,))
            sender.start()  # the answers are read meanwhile: neither side's buffers fill
            got = [read_frame(sock) for _ in range(n)]
            sender.join(10)
        assert [r.opaque for r in got] == list(range(n))
    finally:
        srv.stop()
