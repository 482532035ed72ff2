"""A NameServer and a broker inside the calling process, for examples, notebooks, tests and
benchmarks: one object instead of `shmq start` in another terminal.

The broker's agents (writer, reput, flush, cleaner) are still separate processes, exactly as
under `shmq start`; only the supervisor and the NameServer run in this process. Without a
``store`` the store lives in a temporary directory that is removed on exit, and its files are
small (64 MiB CommitLog files instead of RocketMQ's 1 GiB), which suits trying things out.
The NameServer keeps its KV config (mqadmin ``updateKvConfig``) in the store, at
``namesrv/kvConfig.json``, never in the home directory.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from types import TracebackType
from typing import TYPE_CHECKING, Any

from shmq.errors import ShmqError

if TYPE_CHECKING:
    from shmq.broker.config.broker_config import BrokerConfig

DEMO_COMMITLOG_FILE_SIZE = 64 << 20


class EmbeddedBroker:
    """Start a NameServer and a broker here; ``namesrv`` is the address clients use.

    ``topics`` maps topic names to queue counts created before ``start()`` returns; any other
    keyword is a ``BrokerConfig`` field (``flush_disk_type="SYNC_FLUSH"``, ``ring_size=…``).
    Without a ``base`` config, RocketMQ 5's gRPC proxy runs only when asked for
    (``proxy_enable=True``), on any free port unless ``grpc_server_port`` is given;
    ``grpc_address`` is where it listens.

    The agents are processes started with multiprocessing's ``spawn``, which runs the main
    script again in each: a script starts the broker under ``if __name__ == "__main__":``
    (``start`` refuses in one line otherwise). Example::

        import shmq


        def main() -> None:
            with shmq.EmbeddedBroker(topics={"Orders": 4}) as mq:
                with shmq.Producer("demo-producer", mq.namesrv) as producer:
                    producer.send(shmq.Message("Orders", b"hello"))


        if __name__ == "__main__":
            main()
    """

    def __init__(
        self,
        store: str | None = None,
        *,
        topics: dict[str, int] | None = None,
        log_level: int = logging.WARNING,
        host: str | None = None,
        namesrv_port: int = 0,
        namesrv: str | None = None,
        base: BrokerConfig | None = None,
        **config: Any,
    ) -> None:
        """``host`` is the address the NameServer binds (127.0.0.1 when None) and the broker
        registers as its ``brokerIP1`` (the config's when None). The NameServer listens on
        ``namesrv_port``, the broker on ``listen_port`` (a keyword); 0, their default, is any
        free port. ``namesrv`` joins a running NameServer (a slave beside its master)
        instead of starting one. ``base`` is a config read from a file
        (``load_broker_config``) under the keywords; the store, ports and namesrv given here
        win over it."""
        self._own_store = store is None
        self.store = store or tempfile.mkdtemp(prefix="shmq-embedded-")
        self.topics = dict(topics or {})
        self.log_level = log_level
        self.host = host
        self.namesrv_port = namesrv_port
        self.base = base
        self.config = config
        self.namesrv = namesrv or ""
        self.broker_address = ""
        self.grpc_address = ""  # the gRPC proxy's ``ip:port`` (empty: not serving one)
        self._join_namesrv = namesrv is not None
        self._namesrv: Any = None
        self._broker: Any = None
        self._stop_requested = False  # a plain flag: set in signal handlers
        self._stop_reason = ""

    def start(self) -> EmbeddedBroker:
        # Imported here, not at the top: every agent process spawn starts imports the
        # caller's main module again, and one that imports EmbeddedBroker at its top would
        # import the supervisor and the namesrv too (1.3 s against the agent's own 0.3 s).
        from shmq.broker.config.broker_config import BrokerConfig
        from shmq.broker.supervisor import Broker
        from shmq.namesrv.kv_config import FILE_NAME
        from shmq.namesrv.server import NameServer

        try:
            if not self._join_namesrv:
                kv_config_path = os.path.join(self.store, "namesrv", FILE_NAME)
                host = self.host or "127.0.0.1"
                self._namesrv = NameServer(host, self.namesrv_port, kv_config_path=kv_config_path)
                self._namesrv.start()
                self.namesrv = self._namesrv.address
            settings: dict[str, Any] = {"listen_port": 0}
            if self.base is None:  # gRPC only when asked for, on any free port by default
                settings.update(proxy_enable=False, grpc_server_port=0)
            if self._own_store:
                settings["mapped_file_size_commit_log"] = DEMO_COMMITLOG_FILE_SIZE
            settings.update(self.config)
            settings.update(namesrv_addr=self.namesrv, store_path_root_dir=self.store)
            if self.host is not None:
                settings["broker_ip1"] = self.host
            base = self.base if self.base is not None else BrokerConfig()
            self._broker = Broker(base.replace(**settings), log_level=self.log_level)
            if self._stop_requested:  # a signal came before the broker existed
                self._broker.request_stop()
            self._broker.start()
            self.broker_address = self._broker.address
            self.grpc_address = self._broker.grpc_address
            for topic, queues in self.topics.items():
                self.create_topic(topic, queues)
        except BaseException:
            self.stop()
            raise
        return self

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create (or update) ``topic`` with ``queues`` read and write queues, in this
        process (no request: with ``acl_enable`` there is no account to sign one with)."""
        from shmq.broker.topic.config import TopicConfig  # as in ``start``

        if self._broker is None:
            raise ShmqError("the embedded broker is not started")
        self._broker.create_topic(TopicConfig(topic, queues, queues))

    def stop(self) -> None:
        """Stop the broker (a clean stop: rings drained, offsets persisted), then the
        NameServer; remove the store if it is a temporary one. Idempotent."""
        if self._broker is not None:
            self._broker.stop()
            self._stop_reason = self._broker.stop_reason
            self._broker = None
        if self._namesrv is not None:
            self._namesrv.stop()
            self._namesrv = None
        if self._own_store:
            shutil.rmtree(self.store, ignore_errors=True)

    def request_stop(self) -> None:
        """Ask ``wait`` to return; safe in a signal handler (it sets flags and takes no
        lock), also before or during ``start`` (the broker then stops once started, its
        shared memory unlinked)."""
        self._stop_requested = True
        if self._broker is not None:
            self._broker.request_stop()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ``request_stop`` or until the broker stopped itself (a fault it could
        not isolate: ``stop_reason`` says which), at most ``timeout`` seconds; whether one
        of them happened. ``stop`` still has to be called."""
        if self._broker is None:
            return self._stop_requested
        return self._broker.wait(timeout)

    @property
    def stop_reason(self) -> str:
        """Why the broker stopped itself; empty when it was asked to stop."""
        return self._broker.stop_reason if self._broker is not None else self._stop_reason

    @property
    def broker(self) -> Any:
        """The running supervisor (``shmq.broker.supervisor.Broker``), for tests and
        benchmarks that read its counters and tables; None when stopped."""
        return self._broker

    def stats(self) -> dict[str, Any]:
        """The broker's runtime numbers (as ``shmq status`` shows them)."""
        return self._broker.stats() if self._broker is not None else {}

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
