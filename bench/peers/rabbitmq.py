"""RabbitMQ: Debian's ``rabbitmq-server`` started by the bench on loopback (its own ``epmd``
and ports, node data and logs in a temporary directory, no plugins), used the durable way:
a durable queue, persistent messages (delivery mode 2), publisher confirms, prefetch 1,000
and multiple acks. Skipped when it does not start within a minute.

The publisher is pika's ``SelectConnection`` pumped from the send loop, keeping up to
``WINDOW`` unconfirmed messages in flight (a blocking channel with confirms waits for each
confirm, i.e. for the disk, per message); the consumer is a ``BlockingConnection`` that
acks everything it has received with one ``multiple`` ack per batch.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import Any

from bench.peers.base import Endpoint, Peer, PeerUnavailable, Receiver, Sender
from bench.servers import find_program, free_port, port_open, server_process, temp_dir
from bench.workloads import Api, Case, Workload

START_TIMEOUT_S = 60.0
WINDOW = 2000  # unconfirmed publishes in flight per producer
PREFETCH = 1000
PUMP_EVERY = 128  # publishes between non-blocking turns of the I/O loop
TIMEOUT_S = 60.0


class RabbitMqPeer(Peer):
    system = "RabbitMQ"
    module = __name__
    durable = True
    apis = (Api("basic_publish+confirms"),)
    cap = 50_000  # persistent + confirmed: ~5,000–10,000 msg/s here

    def skip_reason(self, workload: Workload, quick: bool) -> str | None:
        if quick:
            return "not in --quick: the server takes ~10 s to start; run the full bench"
        return None

    def unavailable(self) -> str | None:
        try:
            import pika  # noqa: F401
        except ImportError as exc:
            return f"pika is not installed ({exc}); pip install -e '.[bench]'"
        for program in ("rabbitmq-server", "epmd"):
            if _program(program) is None:
                return f"{program} not found (apt-get install -y rabbitmq-server)"
        return None

    def server_key(self, flavor: str) -> str:
        return "rabbitmq"  # confirms already wait for the disk: one server serves both

    @contextlib.contextmanager
    def server(self, flavor: str) -> Iterator[Endpoint]:
        epmd_port, port, dist_port = free_port(), free_port(), free_port()
        with temp_dir("shmq-bench-rabbitmq-") as path:
            (path / "enabled_plugins").write_text("[].\n")
            env = {
                **os.environ,
                "HOME": str(path),  # the Erlang cookie goes here
                "ERL_EPMD_PORT": str(epmd_port),
                "RABBITMQ_NODENAME": f"shmqbench{os.getpid()}@localhost",
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(port),
                "RABBITMQ_DIST_PORT": str(dist_port),
                "RABBITMQ_MNESIA_BASE": str(path / "mnesia"),
                "RABBITMQ_LOG_BASE": str(path / "log"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(path / "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": str(path / "rabbitmq"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(path / "advanced.config"),
                "RABBITMQ_PID_FILE": str(path / "rabbitmq.pid"),
            }
            started = time.monotonic()
            with (
                server_process(
                    [_program("epmd") or "epmd", "-port", str(epmd_port)],
                    ready=lambda: port_open(epmd_port),
                    start_timeout_s=10,
                    log=path / "epmd.log",
                ),
                server_process(
                    [_program("rabbitmq-server") or "rabbitmq-server"],
                    ready=lambda: port_open(port),
                    start_timeout_s=START_TIMEOUT_S,
                    log=path / "rabbitmq.log",
                    env=env,
                    cwd=path,
                ),
            ):
                yield {"port": port, "start_s": time.monotonic() - started}

    def prepare(self, endpoint: Endpoint, case: Case) -> Endpoint:
        with _admin(endpoint["port"]) as channel:
            channel.queue_declare(case.name, durable=True)
            channel.queue_purge(case.name)
        return {"port": endpoint["port"], "queue": case.name}

    def finish(self, endpoint: Endpoint, case_endpoint: Endpoint, case: Case) -> dict[str, Any]:
        with _admin(endpoint["port"]) as channel:
            channel.queue_delete(case.name)
        return {}


def _program(name: str) -> str | None:
    """The real server script, not Debian's wrapper that re-runs it as user rabbitmq."""
    if name == "rabbitmq-server" and os.access("/usr/lib/rabbitmq/bin/rabbitmq-server", os.X_OK):
        return "/usr/lib/rabbitmq/bin/rabbitmq-server"
    return find_program(name)


@contextlib.contextmanager
def _admin(port: int) -> Iterator[Any]:
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
    try:
        yield conn.channel()
    finally:
        conn.close()


class _Publisher(Sender):
    """Publishes through an asynchronous connection whose I/O loop the send loop turns:
    without blocking every ``PUMP_EVERY`` messages (every message when paced), blocking
    while ``WINDOW`` messages await their confirm, and until all are confirmed at flush."""

    def __init__(self, port: int, queue: str, eager: bool) -> None:
        import pika
        from pika import spec

        self.queue, self.eager = queue, eager
        self.props = pika.BasicProperties(delivery_mode=2)  # persistent
        self.nack = spec.Basic.Nack
        self.published = self.confirmed = 0
        self.ready = False
        self.error: str | None = None
        self.channel: Any = None
        self.conn = pika.SelectConnection(
            pika.ConnectionParameters("127.0.0.1", port),
            on_open_callback=lambda c: c.channel(on_open_callback=self._channel_open),
            on_open_error_callback=lambda _c, exc: self._fail(f"connect: {exc}"),
            on_close_callback=lambda _c, exc: self._fail(f"closed: {exc}"),
        )
        self.loop = self.conn.ioloop
        self.loop.activate_poller()  # what ioloop.start() does before its first poll
        self._pump_until(lambda: self.ready)

    def _channel_open(self, channel: Any) -> None:
        self.channel = channel
        channel.confirm_delivery(self._confirmed, callback=lambda _f: self._set_ready())

    def _set_ready(self) -> None:
        self.ready = True

    def _fail(self, why: str) -> None:
        if self.error is None:
            self.error = why

    def _confirmed(self, frame: Any) -> None:
        method = frame.method
        if isinstance(method, self.nack):
            self._fail(f"publish {method.delivery_tag} nacked by the broker")
        if method.multiple:
            self.confirmed = max(self.confirmed, method.delivery_tag)
        else:
            self.confirmed += 1

    def _pump(self, block: bool) -> None:
        if not block:
            self.loop.call_later(0, _nothing)  # poll returns at once
        self.loop.poll()
        self.loop.process_timeouts()

    def _pump_until(self, done: Any) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not done():
            if self.error is not None:
                raise PeerUnavailable(f"RabbitMQ publisher: {self.error}")
            if time.monotonic() > deadline:
                raise TimeoutError("RabbitMQ publisher: no progress within 60 s")
            self._pump(True)

    def send(self, body: bytes) -> None:
        self.channel.basic_publish("", self.queue, body, self.props)
        self.published += 1
        if self.eager or self.published % PUMP_EVERY == 0:
            self._pump(False)
        if self.published - self.confirmed >= WINDOW:
            self._pump_until(lambda: self.published - self.confirmed < WINDOW // 2)

    def flush(self) -> None:
        self._pump_until(lambda: self.confirmed >= self.published)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()
            deadline = time.monotonic() + 5
            while not self.conn.is_closed and time.monotonic() < deadline:
                self._pump(True)
        with contextlib.suppress(Exception):
            self.loop.deactivate_poller()


def _nothing() -> None:
    return None


class _Consumer(Receiver):
    def __init__(self, port: int, queue: str) -> None:
        import pika

        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port))
        self.channel = self.conn.channel()
        self.channel.basic_qos(prefetch_count=PREFETCH)
        self.bodies: list[bytes] = []
        self.last_tag = 0
        self.channel.basic_consume(queue, self._delivered)

    def _delivered(self, _ch: Any, method: Any, _props: Any, body: bytes) -> None:
        self.bodies.append(body)
        self.last_tag = method.delivery_tag

    def recv(self, timeout: float) -> Sequence[bytes]:
        self.conn.process_data_events(time_limit=0)
        if not self.bodies:
            self.conn.process_data_events(time_limit=timeout)
        out, self.bodies = self.bodies, []
        if out:
            self.channel.basic_ack(self.last_tag, multiple=True)
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def open_sender(endpoint: Endpoint, case: Case, index: int) -> Sender:
    return _Publisher(endpoint["port"], endpoint["queue"], eager=case.workload.latency)


def open_receiver(endpoint: Endpoint, case: Case) -> Receiver:
    return _Consumer(endpoint["port"], endpoint["queue"])
