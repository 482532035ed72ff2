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
from typing import Any

DEMO_COMMITLOG_FILE_SIZE = 64 << 20


class EmbeddedBroker:
    """Start a NameServer and a broker here; ``namesrv`` is the address clients use.

    ``topics`` maps topic names to queue counts created before ``start()`` returns; any other
    keyword is a ``BrokerConfig`` field (``flush_disk_type="SYNC_FLUSH"``, ``ring_size=…``).

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
        **config: Any,
    ) -> None:
        self._own_store = store is None
        self.store = store or tempfile.mkdtemp(prefix="shmq-embedded-")
        self.topics = dict(topics or {})
        self.log_level = log_level
        self.config = config
        self.namesrv = ""
        self.broker_address = ""
        self._namesrv: Any = None
        self._broker: Any = None

    def start(self) -> EmbeddedBroker:
        from shmq.broker.config.broker_config import BrokerConfig
        from shmq.broker.supervisor import Broker
        from shmq.namesrv.kv_config import FILE_NAME
        from shmq.namesrv.server import NameServer

        try:
            kv_config_path = os.path.join(self.store, "namesrv", FILE_NAME)
            self._namesrv = NameServer("127.0.0.1", 0, kv_config_path=kv_config_path)
            self._namesrv.start()
            self.namesrv = self._namesrv.address
            settings: dict[str, Any] = {"listen_port": 0}
            if self._own_store:
                settings["mapped_file_size_commit_log"] = DEMO_COMMITLOG_FILE_SIZE
            settings.update(self.config)
            settings.update(namesrv_addr=self.namesrv, store_path_root_dir=self.store)
            self._broker = Broker(BrokerConfig().replace(**settings), log_level=self.log_level)
            self._broker.start()
            self.broker_address = self._broker.address
            for topic, queues in self.topics.items():
                self.create_topic(topic, queues)
        except BaseException:
            self.stop()
            raise
        return self

    def create_topic(self, topic: str, queues: int = 4) -> None:
        """Create (or update) ``topic`` with ``queues`` read and write queues."""
        from shmq.remoting.client import RemotingClient
        from shmq.remoting.protocol import RequestCode

        with RemotingClient() as client:
            client.invoke_json(
                self.broker_address,
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues},
            )

    def stop(self) -> None:
        """Stop the broker (a clean stop: rings drained, offsets persisted), then the
        NameServer; remove the store if it is a temporary one. Idempotent."""
        if self._broker is not None:
            self._broker.stop()
            self._broker = None
        if self._namesrv is not None:
            self._namesrv.stop()
            self._namesrv = None
        if self._own_store:
            shutil.rmtree(self.store, ignore_errors=True)

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
