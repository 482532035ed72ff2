"""The broker's tables as the data server needs them: the topic configs, the subscription
groups and the live config keys, asked of the control server over an internal client.

The topic table in shared memory (``ipc.topic_table``) says which topics exist and their
queues and permissions; the processors need a topic's whole config (``topicFilterType``),
so it is fetched (GET_ALL_TOPIC_CONFIG) when the table's VERSION word changed since the
last fetch. Groups (GET_ALL_SUBSCRIPTIONGROUP_CONFIG) are fetched at most once a second,
when used. The broker's config is fetched (GET_BROKER_CONFIG) when the counters'
CONFIG_VERSION word changed: its live keys (an updateBrokerConfig's) and role (a
promotion's) replace the config the process started with.

Only what the data server serves locally reaches these lookups (``routing``): a send that
would create a topic is relayed, so ``create_auto``, ``create`` and ``ensure`` refuse.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from shmq import json_file
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.config.updates import LIVE_KEYS
from shmq.broker.subscription.groups import SubscriptionGroupConfig
from shmq.broker.topic.config import TopicConfig
from shmq.config import snake_case
from shmq.errors import ConfigError, ResponseError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import topic_table as tt
from shmq.java_properties import parse_properties
from shmq.remoting.client import RemotingClient
from shmq.remoting.codes import RequestCode, ResponseCode
from shmq.remoting.protocol import RemotingCommand, check_response

log = logging.getLogger(__name__)

GROUPS_FRESH_S = 1.0
ROLE_KEYS = frozenset({"broker_role", "broker_id"})  # a promotion's


class ControlTables:
    """The lookups (``TopicLookup``, ``TopicCreation``, ``GroupLookup``) and the config."""

    def __init__(
        self, client: RemotingClient, control: str, config: BrokerConfig,
        topics: np.ndarray, counters: np.ndarray,
    ) -> None:  # fmt: skip
        self.client = client
        self.control = control
        self._config = config
        self._config_version = cn.load(counters, cn.CONFIG_VERSION)
        self.topic_words = topics
        self.counters = counters
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self._topics_version = -1
        self._groups: dict[str, SubscriptionGroupConfig] = {}
        self._groups_at = -GROUPS_FRESH_S
        self._fetching = False  # a background fetch of the groups runs (``knows_group``)

    def _ask(self, code: int) -> str:
        response = check_response(self.client.invoke(self.control, RemotingCommand.request(code)))
        return (response.body or b"").decode()

    def _table(self, code: int, key: str) -> dict:
        data = json_file.loads_fastjson(self._ask(code))
        table = data.get(key) if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"the control server's {key} is "
                                "not a JSON object")  # fmt: skip
        return table

    # -- the config -------------------------------------------------------------------------

    @property
    def config(self) -> BrokerConfig:
        """The broker's config with the control server's live keys (re-read when the
        CONFIG_VERSION word changed)."""
        version = cn.load(self.counters, cn.CONFIG_VERSION)
        if version != self._config_version:
            with self._lock:
                if version != self._config_version:
                    values = parse_properties(self._ask(RequestCode.GET_BROKER_CONFIG))
                    taken = {k: v for k, v in values.items()
                             if snake_case(k) in LIVE_KEYS | ROLE_KEYS}  # fmt: skip
                    self._config = self._config.replace(**taken)
                    self._config_version = version
        return self._config

    # -- topics -----------------------------------------------------------------------------

    def get(self, name: str) -> TopicConfig | None:
        version = tt.load_version(self.topic_words)
        if version != self._topics_version:
            with self._lock:
                if version != self._topics_version:
                    table = self._table(RequestCode.GET_ALL_TOPIC_CONFIG, "topicConfigTable")
                    self._topics = {n: TopicConfig.from_json(c) for n, c in table.items()}
                    self._topics_version = version
        return self._topics.get(name)

    def create_auto(self, name: str, queues: int | None) -> TopicConfig:
        raise ConfigError(f"topic {name} is not in the broker's topic table (yet)")

    def create(self, cfg: TopicConfig) -> None:
        raise ResponseError(ResponseCode.SYSTEM_ERROR, f"the data server cannot create topic "
                            f"{cfg.topic_name}: the control server does")  # fmt: skip

    def ensure(self, topic: str, queues: int) -> TopicConfig:
        cfg = self.get(topic)
        if cfg is None:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"the data server cannot create "
                                f"topic {topic}: the control server does")  # fmt: skip
        return cfg

    # -- groups -----------------------------------------------------------------------------

    def knows_group(self, group: str) -> bool:
        """Whether ``group``'s config is known here, without waiting (on the loop): an
        unknown group has the groups fetched again in the background, at most once a
        second, so its next pulls can be served here."""
        if group in self._groups:
            return True
        if time.monotonic() - self._groups_at >= GROUPS_FRESH_S and not self._fetching:
            self._fetching = True
            threading.Thread(target=self._fetch_groups_quietly, name="shmq-data-groups",
                             daemon=True).start()  # fmt: skip
        return False

    def _fetch_groups_quietly(self) -> None:
        try:
            self._fetch_groups()
        except (ShmqError, OSError) as exc:
            log.warning("cannot fetch the subscription groups: %s", exc)
        finally:
            self._fetching = False

    def _fetch_groups(self) -> None:
        with self._lock:
            if time.monotonic() - self._groups_at < GROUPS_FRESH_S:
                return
            table = self._table(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                "subscriptionGroupTable")  # fmt: skip
            self._groups = {n: SubscriptionGroupConfig.from_json(c) for n, c in table.items()}
            self._groups_at = time.monotonic()

    def find(self, group: str, auto_create: bool) -> SubscriptionGroupConfig:
        """The group's config (``SubscriptionGroupManager.find``); a group created because
        of ``auto_create`` is created in the control server's table, as a pull there
        creates it."""
        self._fetch_groups()
        cfg = self._groups.get(group)
        if cfg is not None:
            return cfg
        if not auto_create:
            raise ResponseError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group {group} does not exist and "
                                "autoCreateSubscriptionGroup is false")  # fmt: skip
        with self._lock:
            self._groups_at = -GROUPS_FRESH_S  # created meanwhile (a heartbeat)?
        self._fetch_groups()
        with self._lock:
            cfg = self._groups.get(group)
            if cfg is None:
                cfg = SubscriptionGroupConfig(group)
                request = RemotingCommand.request(
                    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                    body=RemotingCommand.body_json(cfg.to_json()),
                )
                check_response(self.client.invoke(self.control, request))
                self._groups[group] = cfg
        return cfg

    @property
    def creates_groups(self) -> bool:
        """``autoCreateSubscriptionGroup`` as last read (without asking: on the loop)."""
        return self._config.auto_create_subscription_group
