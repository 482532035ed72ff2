"""A bare gRPC client of the proxy for tests, on the proxy's own generated stubs: what an
official RocketMQ 5 client sends (metadata, settings on Telemetry, v1 message ids), one RPC
at a time, so a test says exactly what goes over the wire."""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
import uuid

import grpc
from google.protobuf.duration_pb2 import Duration

from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.proxy.v2 import service_pb2_grpc

_SEQUENCE = itertools.count()
_EPOCH_2021 = 1609459200


def message_id() -> str:
    """A 5.x v1 message id (MessageIdCodec): version, MAC, pid, seconds, sequence."""
    mac = uuid.getnode().to_bytes(6, "big")
    seconds = int(time.time()) - _EPOCH_2021
    raw = (b"\x01" + mac + (os.getpid() & 0xFFFF).to_bytes(2, "big")
           + (seconds & 0xFFFFFFFF).to_bytes(4, "big")
           + (next(_SEQUENCE) & 0xFFFFFFFF).to_bytes(4, "big"))  # fmt: skip
    return raw.hex().upper()


def millis(ms: int) -> Duration:
    d = Duration()
    d.FromMilliseconds(ms)
    return d


def message(topic: str, body: bytes = b"hello", **system) -> pb.Message:
    sp = pb.SystemProperties(
        message_id=system.pop("message_id", None) or message_id(),
        message_type=system.pop("message_type", pb.NORMAL),
        **system,
    )
    return pb.Message(topic=pb.Resource(name=topic), system_properties=sp, body=body)


class Client:
    """One client id's channel to the proxy: plaintext, or TLS trusting ``root_certificates``
    (PEM) when given."""

    def __init__(self, address: str, client_id: str | None = None, *,
                 root_certificates: bytes | None = None) -> None:  # fmt: skip
        self.channel = (
            grpc.insecure_channel(address) if root_certificates is None
            else grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates))
        )  # fmt: skip
        self.stub = service_pb2_grpc.MessagingServiceStub(self.channel)
        self.client_id = client_id if client_id is not None else f"test@{uuid.uuid4().hex}"
        self.metadata = [("x-mq-client-id", self.client_id), ("x-mq-language", "PYTHON"),
                         ("x-mq-client-version", "5.0.7"), ("x-mq-protocol", "v2")]  # fmt: skip
        self.commands: queue.Queue = queue.Queue()
        self._outgoing: queue.Queue = queue.Queue()
        self._telemetry = None

    def call(self, rpc: str, request, timeout: float = 30.0):
        return getattr(self.stub, rpc)(request, metadata=self.metadata, timeout=timeout)

    def receive(self, group: str, topic: str, *, batch: int = 32, invisible_ms: int = 30_000,
                polling_ms: int = 5_000, expression: str = "*", timeout: float = 30.0,
                sql: bool = False):  # fmt: skip
        """``(status, messages, delivery_timestamp_last)`` of one ReceiveMessage
        (``sql``: ``expression`` is a SQL92 filter, else a tag expression)."""
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
            filter_expression=pb.FilterExpression(type=pb.SQL if sql else pb.TAG,
                                                  expression=expression),
            batch_size=batch, invisible_duration=millis(invisible_ms),
            long_polling_timeout=millis(polling_ms))  # fmt: skip
        parts = list(self.call("ReceiveMessage", request, timeout))
        kinds = [p.WhichOneof("content") for p in parts]
        assert kinds[0] == "status" and kinds[-1] == "delivery_timestamp", kinds
        return parts[0].status, [p.message for p in parts if p.HasField("message")]

    def open_telemetry(self, settings: pb.Settings) -> pb.TelemetryCommand:
        """Open the Telemetry stream, announce ``settings``; returns the proxy's answer.
        Later server commands land in ``commands``."""
        self._outgoing.put(spb.TelemetryCommand(settings=settings))

        def requests():
            while True:
                item = self._outgoing.get()
                if item is None:
                    return
                yield item

        self._telemetry = self.stub.Telemetry(requests(), metadata=self.metadata)

        def read():
            try:
                for command in self._telemetry:
                    self.commands.put(command)
            except grpc.RpcError as exc:
                self.commands.put(exc)

        threading.Thread(target=read, daemon=True).start()
        return self.commands.get(timeout=30)

    def publish(self, *topics: str) -> pb.TelemetryCommand:
        return self.open_telemetry(pb.Settings(
            client_type=pb.PRODUCER, request_timeout=millis(3000),
            publishing=pb.Publishing(topics=[pb.Resource(name=t) for t in topics])))  # fmt: skip

    def subscribe(self, group: str, topic: str, client_type=pb.SIMPLE_CONSUMER,
                  fifo: bool = False, sql: str | None = None) -> pb.TelemetryCommand:  # fmt: skip
        expression = (pb.FilterExpression(type=pb.SQL, expression=sql) if sql is not None
                      else pb.FilterExpression(type=pb.TAG, expression="*"))  # fmt: skip
        sub = pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=expression)])  # fmt: skip
        if fifo:
            sub.fifo = True
        return self.open_telemetry(pb.Settings(client_type=client_type, subscription=sub,
                                               request_timeout=millis(3000)))  # fmt: skip

    def send(self, *messages: pb.Message) -> spb.SendMessageResponse:
        return self.call("SendMessage", spb.SendMessageRequest(messages=list(messages)))

    def ack(self, group: str, topic: str, *msgs: pb.Message) -> spb.AckMessageResponse:
        entries = [
            spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle,
            )
            for m in msgs
        ]
        return self.call(
            "AckMessage",
            spb.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries
            ),
        )

    def close(self) -> None:
        self._outgoing.put(None)
        if self._telemetry is not None:
            self._telemetry.cancel()
        self.channel.close()
