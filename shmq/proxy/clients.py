"""The gRPC clients the proxy knows (RocketMQ 5.3's ``GrpcChannelManager`` and the settings
map of ``GrpcClientSettingsManager``): each client's settings, its language and version,
and its open Telemetry streams, which carry the proxy's commands to it (orphaned
transactions to recover, thread stacks, message verification).

Everything here runs on the server's event loop. A stream's outgoing commands wait in a
small bounded queue: a client that stops reading loses commands (the broker checks an
orphaned transaction again later), it never grows the proxy's memory. A client that neither
heartbeats nor holds a stream for ``CLIENT_EXPIRY_S`` is forgotten, and at most
``MAX_CLIENTS`` are kept (the idlest go first).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb

CLIENT_EXPIRY_S = 120.0  # RocketMQ's channel expiry
MAX_CLIENTS = 10_000
STREAM_QUEUE = 64  # commands waiting for one stream's reader


class TelemetryStream:
    """The outgoing side of one client's Telemetry stream."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.queue: asyncio.Queue[spb.TelemetryCommand | None] = asyncio.Queue(STREAM_QUEUE)

    def offer(self, command: spb.TelemetryCommand | None) -> bool:
        """Queue ``command`` (None: end the stream); False when the reader is that far
        behind (the command is dropped)."""
        try:
            self.queue.put_nowait(command)
        except asyncio.QueueFull:
            return False
        return True


@dataclass
class Client:
    client_id: str
    language: str
    version: str
    settings: pb.Settings | None = None
    streams: set[TelemetryStream] = field(default_factory=set)
    last_seen: float = field(default_factory=time.monotonic)


class ClientRegistry:
    """Clients by id, and the Telemetry streams open at once (at most ``max_streams``)."""

    def __init__(self, max_streams: int) -> None:
        self.max_streams = max_streams
        self.clients: dict[str, Client] = {}
        self.open_streams = 0

    def client(self, client_id: str, language: str = "", version: str = "") -> Client:
        """The client, known from now on if it was not; its last-seen time is now."""
        known = self.clients.get(client_id)
        if known is None:
            if len(self.clients) >= MAX_CLIENTS:
                self.expire(force=True)
            known = self.clients[client_id] = Client(client_id, language, version)
        known.last_seen = time.monotonic()
        if language:
            known.language, known.version = language, version
        return known

    def settings(self, client_id: str) -> pb.Settings | None:
        known = self.clients.get(client_id)
        return known.settings if known is not None else None

    def remove(self, client_id: str) -> Client | None:
        """Forget the client (NotifyClientTermination); its streams end."""
        gone = self.clients.pop(client_id, None)
        if gone is not None:
            for stream in gone.streams:
                stream.offer(None)
        return gone

    def open_stream(self, client_id: str) -> TelemetryStream | None:
        """A new stream of ``client_id``'s, or None when ``max_streams`` are open."""
        if self.open_streams >= self.max_streams:
            return None
        stream = TelemetryStream(client_id)
        self.open_streams += 1
        self.client(client_id).streams.add(stream)
        return stream

    def close_stream(self, stream: TelemetryStream) -> None:
        self.open_streams -= 1
        known = self.clients.get(stream.client_id)
        if known is not None:
            known.streams.discard(stream)
            known.last_seen = time.monotonic()

    def publishers(self, topic: str) -> list[TelemetryStream]:
        """The open streams of clients whose settings publish ``topic``."""
        return [stream for known in self.clients.values()
                if known.settings is not None and known.settings.HasField("publishing")
                and any(t.name == topic for t in known.settings.publishing.topics)
                for stream in known.streams]  # fmt: skip

    def expire(self, force: bool = False) -> None:
        """Forget clients silent for ``CLIENT_EXPIRY_S`` without a stream; ``force``: also
        the idlest tenth, to make room."""
        now = time.monotonic()
        idle = sorted((c for c in self.clients.values() if not c.streams),
                      key=lambda c: c.last_seen)  # fmt: skip
        cut = len(idle) // 10 + 1 if force else 0
        for i, known in enumerate(idle):
            if i < cut or now - known.last_seen > CLIENT_EXPIRY_S:
                del self.clients[known.client_id]
