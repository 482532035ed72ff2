"""The data-path connection against hostile peers: a peer that closes, one that answers
garbage, one that never answers. Every case ends in a clear shmq error, never a hang
(and the producer's and consumer's TCP links built on it report them as such)."""

from __future__ import annotations

import socket
import struct

import pytest
from bad_peers import closes, garbage, sends, silent
from waiting import wait_for

from shmq.client.transport.tcp_pull import TcpConsumerLink
from shmq.client.types import MessageQueue
from shmq.errors import RemotingError, SendError, SendTimeoutError
from shmq.remoting.client import RemotingClient
from shmq.remoting.pipeline import PipelinedChannel, decode_reply
from shmq.remoting.protocol import RemotingCommand, ResponseCode, SerializeType

ONE = (struct.Struct(">i"), 0, 0, 0, 1, b"body", b"\x01T\x00\x02a\x01b\x02", 0, b"K" * 32)


@pytest.mark.parametrize(("behaviour", "error"), [
    (closes, "closed the connection|cannot send|lost"),
    (garbage, "ROCKETMQ header|frame"),
    (silent, "did not answer"),
])  # fmt: skip
def test_a_bad_broker_fails_sends_clearly(peer, behaviour, error):
    tcp, broker, mq = sends(peer(behaviour).address)
    try:
        with pytest.raises((SendError, SendTimeoutError), match=error):
            tcp.send_one(broker, mq, ONE, 0)
    finally:
        tcp.close()


def test_a_bad_broker_fails_pulls_clearly(peer):
    client = RemotingClient()
    link = TcpConsumerLink(client, peer(garbage).address, "g")
    try:
        with pytest.raises(RemotingError, match="ROCKETMQ header"):
            link.pull(MessageQueue("T", "b", 0), 0, 32, "*", None, 0.0, False)
    finally:
        link.close()
        client.close()


def test_a_lost_connection_fails_every_request_in_flight(peer):
    conns = []
    p = peer(lambda c: conns.append(c) or silent(c))
    channel = PipelinedChannel(p.address)
    errors: list = []
    for _ in range(3):
        channel.send(channel.next_opaque(), b"\x00\x00\x00\x04\x00\x00\x00\x00",
                     lambda reply, exc: errors.append(exc), 1e12)  # fmt: skip
    wait_for(lambda: conns, what="the channel's connection")
    conns[0].shutdown(socket.SHUT_RDWR)  # close() alone leaves the peer's recv holding it
    conns[0].close()
    channel._reader.join(5)
    assert len(errors) == 3 and all(isinstance(e, RemotingError) for e in errors)
    with pytest.raises(RemotingError):
        channel.send(channel.next_opaque(), b"", lambda r, e: None, 1e12)
    channel.close()


def test_decode_reply_reads_both_header_encodings():
    for kind in (SerializeType.ROCKETMQ, SerializeType.JSON):
        request = RemotingCommand.request(10, serialize_type=kind)
        frame = RemotingCommand.response_to(request, ResponseCode.SUCCESS, "r", {"a": "1"},
                                            b"body").encode()  # fmt: skip
        opaque, flag, reply = decode_reply(memoryview(frame)[4:])
        assert (opaque, flag & 1, reply.code, reply.remark, reply.ext, reply.body) == (
            request.opaque, 1, 0, "r", {"a": "1"}, b"body")  # fmt: skip
