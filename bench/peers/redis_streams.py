"""Redis Streams: Debian's ``redis-server``, started by the bench on a free loopback port with
an append-only file in a temporary directory (``appendfsync everysec``, Redis's durable
default; ``always`` for W5, an fsync before each reply batch). Producers ``XADD`` one body
per entry, one round trip each or pipelined ``batch`` at a time; the consumer reads with
``XREADGROUP`` (a consumer group, up to 1,000 entries per call) and ``XACK``s each batch
in one call, so delivery is at least once as with shmq's committed offsets."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from bench.peers.base import Endpoint, Peer, Receiver, Sender
from bench.servers import find_program, free_port, server_process, temp_dir
from bench.workloads import Api, Case, Workload

GROUP = b"bench"
READ_COUNT = 1000
FIELD = b"d"


class RedisStreamsPeer(Peer):
    system = "Redis Streams"
    module = __name__
    durable = True
    apis = (Api("XADD"), Api("XADD pipelined", batched=True))
    cap = 1_000_000

    def unavailable(self) -> str | None:
        try:
            import redis  # noqa: F401
        except ImportError as exc:
            return f"the redis client is not installed ({exc}); pip install -e '.[bench]'"
        if find_program("redis-server") is None:
            return "redis-server not found (apt-get install -y redis-server)"
        return None

    def apis_for(self, workload: Workload) -> tuple[Api, ...]:
        """One round trip per message is Redis's single-message API; for bulk throughput
        the pipelined path is the one a user picks, and a round trip per message would
        take minutes for W1, so throughput runs use the pipeline (and both for W5)."""
        if workload.latency:
            return self.apis[:1]
        return self.apis if workload.sync else self.apis[1:]

    @contextlib.contextmanager
    def server(self, flavor: str) -> Iterator[Endpoint]:
        import redis

        port = free_port()
        fsync = "always" if flavor == "sync" else "everysec"
        argv = [find_program("redis-server") or "redis-server", "--port", str(port),
                "--bind", "127.0.0.1", "--appendonly", "yes", "--appendfsync", fsync,
                "--save", "", "--daemonize", "no", "--protected-mode", "yes"]  # fmt: skip
        client = redis.Redis(host="127.0.0.1", port=port)

        def ready() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        with (
            temp_dir("shmq-bench-redis-") as path,
            server_process(
                [*argv, "--dir", str(path)],
                ready=ready,
                start_timeout_s=30,
                log=path / "redis.log",
                cwd=path,
            ),
        ):
            try:
                yield {"port": port, "fsync": fsync}
            finally:
                client.close()

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        import redis

        with redis.Redis(host="127.0.0.1", port=endpoint["port"]) as client:
            client.delete(case.name)
            client.xgroup_create(case.name, GROUP, id="0", mkstream=True)
        return {"port": endpoint["port"], "stream": case.name}

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        import redis

        with redis.Redis(host="127.0.0.1", port=endpoint["port"]) as client:
            client.delete(case.name)  # free the server's memory for the next case
        return {}


class _Sender(Sender):
    def __init__(self, port: int, stream: str) -> None:
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=port)
        self.stream = stream

    def warm_up(self, body: bytes) -> None:
        self.client.ping()

    def send(self, body: bytes) -> None:
        self.client.xadd(self.stream, {FIELD: body})

    def send_prepared(self, batch: list[bytes]) -> None:
        pipe = self.client.pipeline(transaction=False)
        xadd, stream = pipe.xadd, self.stream
        for b in batch:
            xadd(stream, {FIELD: b})
        pipe.execute()

    def close(self) -> None:
        self.client.close()


class _Receiver(Receiver):
    def __init__(self, port: int, stream: str) -> None:
        import redis

        self.client = redis.Redis(host="127.0.0.1", port=port)
        self.stream = stream

    def recv(self, timeout: float) -> Sequence[bytes]:
        reply = self.client.xreadgroup(
            GROUP, b"c", {self.stream: b">"}, count=READ_COUNT, block=int(timeout * 1000)
        )
        if not reply:
            return []
        entries = reply[0][1]
        self.client.xack(self.stream, GROUP, *[e[0] for e in entries])
        return [e[1][FIELD] for e in entries]

    def close(self) -> None:
        self.client.close()


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Sender(endpoint["port"], endpoint["stream"])


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    return _Receiver(endpoint["port"], endpoint["stream"])
