"""A slave copies its master's metadata (RocketMQ's ``SlaveSynchronize``).

The HA agent replicates the CommitLog; the rest of what a broker knows lives in its config
files, and a slave copies those from its master over the control plane, so a consumer that
reads from the slave (the master gone, or ``slaveReadEnable``) finds the topics, resumes
from the group's committed offsets, and a promoted slave delivers delayed messages from
where the master was:

=========================================  ==================================================
request (to the master)                     what the slave does with the answer
=========================================  ==================================================
GET_ALL_TOPIC_CONFIG (21)                   replaces its topics when the dataVersion differs
GET_ALL_CONSUMER_OFFSET (43)                puts every ``topic@group`` entry (4.9's putAll)
GET_ALL_DELAY_OFFSET (45)                   writes the text as its ``delayOffset.json``
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)      replaces its groups when the dataVersion differs
=========================================  ==================================================

and persists each in its own ``config/`` files. It runs every ``slaveSynchronizeInterval``
(10 s, RocketMQ's fixed period) and at once when the slave learns its master's address
from the namesrv's register answer (after its start, and when the master comes back). It
never copies from itself, and stops copying once the broker is no longer a slave (a
controller promotion). An answer that does not parse is logged and skipped; it never
stops the broker.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from shmq import json_file
from shmq.broker.live_config import LiveConfig
from shmq.broker.offset import consumer_offsets
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.schedule.delay_levels import FILE_NAME as DELAY_OFFSET_FILE
from shmq.broker.subscription.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from shmq.broker.topic.config import TopicConfig, TopicConfigManager
from shmq.broker.topic.table import TopicTable
from shmq.errors import ShmqError
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, check_response

log = logging.getLogger(__name__)


class SlaveSynchronize:
    """Copies the master's config tables into a slave's: ``topics`` (published to the
    agents through ``topic_table``), ``groups``, ``offsets`` and the delay offsets file,
    asking with ``client``; ``address`` is the broker's own advertised address (a broker never
    copies from itself). ``run`` is the thread's loop, ``set_master`` the address the
    namesrv answered."""

    def __init__(
        self,
        config: LiveConfig,
        address: Callable[[], str],
        client: RemotingClient,
        topics: TopicConfigManager,
        topic_table: TopicTable,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
    ) -> None:
        self.config = config
        self.address = address  # the broker's advertised ``ip:port``
        self.client = client
        self.topics = topics
        self.topic_table = topic_table
        self.groups = groups
        self.offsets = offsets
        self.master_addr = ""
        self._now = threading.Event()

    def set_master(self, addr: str) -> None:
        """The master's control address (empty: none registered); a new one is copied
        from at once."""
        if addr != self.master_addr:
            log.info("slave synchronize: master %s (was %s)", addr or "none",
                     self.master_addr or "none")  # fmt: skip
            self.master_addr = addr
            if addr:
                self._now.set()

    def run(self, stop: threading.Event) -> None:
        """The thread's loop, until ``stop`` is set (and ``wake`` called)."""
        interval = self.config.current.slave_synchronize_interval / 1000
        while not stop.is_set():
            self._now.wait(interval)
            self._now.clear()
            if not stop.is_set():
                self.sync_all()

    def wake(self) -> None:
        """End the loop's wait now (a stop)."""
        self._now.set()

    def sync_all(self) -> bool:
        """One round: every table the master answers; False when none was copied (no
        master, this broker is not a slave, or every request failed)."""
        master = self.master_addr
        if not master or master == self.address() or not self.config.current.is_slave:
            return False
        copied = False
        for name, sync in (
            ("topic configs", self._topics),
            ("consumer offsets", self._offsets),
            ("delay offsets", self._delay_offsets),
            ("subscription groups", self._groups),
        ):
            try:
                sync(master)
                copied = True
            except (ShmqError, OSError, ValueError, TypeError, KeyError) as exc:
                log.warning("slave synchronize: cannot copy the %s of master %s: %s",
                            name, master, exc)  # fmt: skip
        return copied

    def _ask(self, master: str, code: int) -> str:
        request = RemotingCommand.request(code)
        response = check_response(self.client.invoke(master, request))
        return (response.body or b"").decode()

    def _topics(self, master: str) -> None:
        text = self._ask(master, RequestCode.GET_ALL_TOPIC_CONFIG)
        if self.topics.replace_all(json_file.loads_fastjson(text), TopicConfig.from_json):
            self.topics.persist()
            self.topic_table.publish()
            log.info("slave synchronize: topic configs copied from %s", master)

    def _groups(self, master: str) -> None:
        text = self._ask(master, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups = self.groups
        if groups.replace_all(json_file.loads_fastjson(text), SubscriptionGroupConfig.from_json):
            groups.persist()
            log.info("slave synchronize: subscription groups copied from %s", master)

    def _offsets(self, master: str) -> None:
        table = consumer_offsets.parse(self._ask(master, RequestCode.GET_ALL_CONSUMER_OFFSET))
        self.offsets.put_all(table)
        self.offsets.persist()

    def _delay_offsets(self, master: str) -> None:
        text = self._ask(master, RequestCode.GET_ALL_DELAY_OFFSET)
        data = json_file.loads_fastjson(text, int_keys=True)
        if not isinstance(data, dict) or not isinstance(data.get("offsetTable"), dict):
            raise ValueError(f"the delay offsets {text[:80]!r} have no offsetTable object")
        root = self.config.current.store.store_path_root_dir
        json_file.persist(os.path.join(root, "config", DELAY_OFFSET_FILE), text)
