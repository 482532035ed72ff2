"""A client with credentials signs every request it sends (RocketMQ's ``AclClientRPCHook``),
on every kind of connection, after all its fields are set; answers are not signed; the secret
key shows in no log line, repr or error. Checked with the broker's own ``signature.verify``."""

from __future__ import annotations

import logging
import queue

import numpy as np
import pytest

from shmq.client.transaction.end_frames import EndFrames
from shmq.client.transport.send_frames import SendTemplate
from shmq.client.transport.tcp_pull import TcpConsumerLink
from shmq.client.types import MessageQueue, PullStatus
from shmq.errors import ConfigError, RemotingConnectError
from shmq.remoting.client import RemotingClient
from shmq.remoting.duplex import DuplexChannel
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, decode_frame
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.signature import ACCESS_KEY, SIGNATURE, verify
from shmq.remoting.server import Connection, RemotingServer
from shmq.spark.options import parse_read_options

ECHO = 1001  # a test-only code
SECRET = "s3cret-that-must-not-leak"
CREDENTIALS = ("AK-client", SECRET)


def signed(request: RemotingCommand) -> bool:
    """Whether ``request`` carries the test credentials' valid signature."""
    fields = request.ext_fields
    return fields.get(ACCESS_KEY) == "AK-client" and verify(fields, request.body, SECRET)


@pytest.fixture
def server():
    """A server that records every request it gets, in ``server.seen``."""
    srv = RemotingServer(port=0, name="signing")
    seen: queue.Queue[RemotingCommand] = queue.Queue()

    def record(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        seen.put(req)
        return RemotingCommand.response_to(req, ext_fields={"conn": conn.id})

    def pull(req: RemotingCommand, conn: Connection) -> RemotingCommand:
        seen.put(req)
        offset = req.ext_fields["queueOffset"]
        return RemotingCommand.response_to(req, ResponseCode.PULL_NOT_FOUND, ext_fields={
            "nextBeginOffset": offset, "minOffset": 0, "maxOffset": offset})  # fmt: skip

    for code in (ECHO, RequestCode.HEART_BEAT, RequestCode.END_TRANSACTION):
        srv.register(code, record)
    srv.register(RequestCode.PULL_MESSAGE, pull)
    srv.seen = seen
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def no_secret_logged(caplog):
    """Every test runs with shmq's debug logging on; none may log the secret."""
    with caplog.at_level(logging.DEBUG, logger="shmq"):
        yield
    assert SECRET not in caplog.text


def test_the_reference_example_and_a_secret_kept_out_of_reprs():
    request = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"commitOffset": 100, "consumerGroup": "GID_A", "queueId": 0, "topic": "TopicA"},
    )
    Credentials("RocketMQ", "12345678").sign(request)
    assert request.ext_fields[SIGNATURE] == "JqTWp2Zt+6Ttay4zloc2OX0alG4="  # spec §3.2
    creds = Credentials.of(CREDENTIALS)
    assert creds == Credentials(*CREDENTIALS) and Credentials.of(creds) is creds
    assert Credentials.of(None) is None
    for shown in (repr(creds), str(creds), repr(RemotingClient(credentials=creds).credentials)):
        assert "AK-client" in shown and SECRET not in shown
    opts = parse_read_options({"namesrv": "h:1", "topic": "T", "accessKey": "AK-client",
                               "secretKey": SECRET}, streaming=False)  # fmt: skip
    assert SECRET not in repr(opts) and opts.credentials == creds
    for bad in (("AK", ""), ("", "sk"), ("AK",), "AK:sk", ("AK", 5)):
        with pytest.raises(ConfigError, match="credentials"):
            Credentials.of(bad)  # type: ignore[arg-type]


def test_remoting_client_signs_plain_json_body_and_oneway_requests(server):
    with RemotingClient(credentials=CREDENTIALS, default_timeout=2.0) as client:
        client.invoke(server.address, RemotingCommand.request(ECHO, {"topic": "Tópico", "q": 1}))
        client.invoke(server.address, RemotingCommand.request(ECHO, {"a": "b"}, b"\x00body\xff"))
        client.invoke_json(server.address, ECHO, {"Zed": "upper first"}, body_obj={"k": [1]})
        client.invoke_oneway(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))
        requests = [server.seen.get(timeout=2) for _ in range(4)]
    assert all(signed(r) for r in requests)
    assert requests[1].body == b"\x00body\xff" and requests[3].is_oneway
    assert not verify(requests[1].ext_fields, requests[1].body, "another secret")
    with RemotingClient(default_timeout=2.0) as plain:  # no credentials: nothing added
        plain.invoke(server.address, RemotingCommand.request(ECHO, {"a": "b"}))
    assert server.seen.get(timeout=2).ext_fields == {"a": "b"}


def test_duplex_requests_are_signed_and_answers_are_not(server):
    asked: queue.Queue[RemotingCommand] = queue.Queue()

    def on_request(req: RemotingCommand) -> RemotingCommand:
        asked.put(req)
        return RemotingCommand.response_to(req, body=b"info")

    channel = DuplexChannel(server.address, on_request, credentials=CREDENTIALS)
    try:
        conn_id = int(channel.invoke(RemotingCommand.request(ECHO, {"n": 1})).ext_fields["conn"])
        channel.send_soon(RemotingCommand.request(RequestCode.HEART_BEAT, {"n": 2}, b"x"))
        channel.invoke_json(ECHO, {"n": 3}, body_obj=[1, 2])
        requests = [server.seen.get(timeout=2) for _ in range(3)]
        assert all(signed(r) for r in requests) and requests[1].is_oneway
        conn = server.connection(conn_id)
        assert conn is not None
        answer = conn.invoke(RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO), 2.0)
        assert answer.body == b"info" and ACCESS_KEY not in answer.ext_fields
    finally:
        channel.close()


def test_tcp_pulls_are_signed_with_the_control_clients_credentials(server):
    client = RemotingClient(credentials=CREDENTIALS)
    link = TcpConsumerLink(client, server.address, "G")
    try:
        mq = MessageQueue("T", "b", 0)
        result = link.pull(mq, 7, 32, "*", None, timeout=0, bulk=False)
        assert result.pull_status is PullStatus.NO_NEW_MSG
        request = server.seen.get(timeout=2)
        assert request.code == RequestCode.PULL_MESSAGE and signed(request)
        assert request.ext_fields["queueOffset"] == "7"
    finally:
        link.close()
        client.close()


def _decoded(frame: bytes | memoryview) -> RemotingCommand:
    return decode_frame(bytes(frame)[4:])


def test_send_frames_are_signed_single_reply_oneway_and_batch():
    tpl = SendTemplate("PG", "Topic", 4, Credentials(*CREDENTIALS))
    props = "KEYS\x01clé\x02UNIQ_KEY\x01ABC\x02".encode()
    frames = [
        tpl.frame(5, 1, 0, 1_700_000_000_000, 0, props, b"hello"),
        tpl.frame(6, 2, 0, 1, 3, b"", b"reply", reply=True),  # an empty value is null
        tpl.frame(0, 3, 0, 1, 0, props, b"o", oneway=True, reconsume=2, max_reconsume=16),
        tpl.frame(7, 0, 0, 1, 0, b"", b"batch body", batch=True),
    ]
    for frame in frames:
        request = _decoded(frame)
        assert signed(request), request.ext_fields
    assert _decoded(frames[2]).is_oneway and _decoded(frames[2]).ext_fields["l"] == "16"
    buf, at = tpl.batch_frame(2, 1_700_000_000_000, 6)
    buf[at:] = np.frombuffer(b"entry!", np.uint8)
    tpl.sign_batch(buf, at)
    tpl.set_opaque(buf, 9)
    request = _decoded(buf.data)
    assert signed(request) and request.body == b"entry!" and request.opaque == 9
    plain = SendTemplate("PG", "Topic", 4)  # without credentials: the frames of before
    unsigned = _decoded(plain.frame(5, 1, 0, 1_700_000_000_000, 0, props, b"hello"))
    fields = {k: v for k, v in _decoded(frames[0]).ext_fields.items()
              if k not in (ACCESS_KEY, SIGNATURE)}  # fmt: skip
    assert unsigned.ext_fields == fields


def test_end_transaction_frames_are_signed():
    frames = EndFrames("TxGroup", Credentials(*CREDENTIALS))
    request = _decoded(frames.frame(3, 4096, 8, "7F000001ABCD", True))
    assert signed(request) and request.is_oneway
    assert request.ext_fields["msgId"] == request.ext_fields["transactionId"] == "7F000001ABCD"
    unsigned = _decoded(EndFrames("TxGroup").frame(3, 4096, 8, "7F000001ABCD", True))
    assert {**unsigned.ext_fields, ACCESS_KEY: "AK-client"} == {
        k: v for k, v in request.ext_fields.items() if k != SIGNATURE}  # fmt: skip


def test_errors_do_not_carry_the_secret():
    client = RemotingClient(credentials=CREDENTIALS, connect_timeout=0.5)
    with client, pytest.raises(RemotingConnectError) as info:
        client.invoke("127.0.0.1:1", RemotingCommand.request(ECHO))
    assert SECRET not in str(info.value) and SECRET not in repr(info.value)
