"""The broker's admin requests (RocketMQ's ``AdminBrokerProcessor`` and ``Broker2Client``):
topic and consume statistics, consumer connections and running info, subscription groups,
offset resets.

What ``mqadmin topicStatus``, ``consumerProgress``, ``consumerConnection``,
``producerConnection``, ``consumerStatus``, ``getBrokerConfig``, ``updateSubGroup`` /
``deleteSubGroup`` and ``resetOffsetByTime`` ask a broker; ``consumerStatus``
(GET_CONSUMER_RUNNING_INFO) and ``queryMsgById -g -d`` (CONSUME_MESSAGE_DIRECTLY, with the
message's record) are passed on to the consumer itself, over the connection it heartbeats
on, and ``getConsumerStatus`` (INVOKE_BROKER_TO_GET_CONSUMER_STATUS) asks every member
for its offsets (GET_CONSUMER_STATUS_FROM_CLIENT). Offsets and store lookups go through the
broker's one store view (``store_view``: queue maxima, min offset, search by time, store
times), so every request answers them from the same code.

Bodies are RocketMQ's: ``TopicStatsTable``, ``ConsumeStats`` and ``ResetOffsetBody``
(INVOKE_BROKER_TO_RESET_OFFSET, RESET_CONSUMER_CLIENT_OFFSET) are maps keyed by
``MessageQueue`` objects, written as fastjson does (``shmq.remoting.admin_bodies``).

Unlike RocketMQ 4.9, a reset commits the new offsets on the broker itself before telling
the group's online consumers, so it also works while the group is offline.

``QUERY_MESSAGE_BY_TIME`` (shmq's own code) returns the messages of a topic stored within
a time range (``shmq admin query-msg-by-time``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from shmq import json_file
from shmq.broker.config.broker_config import to_properties
from shmq.broker.config.updates import BLACK_LIST_REMARK, ConfigUpdate
from shmq.broker.config.updates import persist as persist_config
from shmq.broker.context import BrokerContext
from shmq.broker.processors.admin.topics import existing_topic
from shmq.broker.processors.responses import fastjson_response, json_response
from shmq.broker.schedule.delay_levels import FILE_NAME as DELAY_OFFSET_FILE
from shmq.broker.subscription.groups import SubscriptionGroupConfig
from shmq.errors import ConfigError, RemotingError, RemotingTimeoutError, ResponseError
from shmq.ipc import counters as cn
from shmq.message import MessageExt, message_to_json, parse_offset_msg_id
from shmq.remoting import fastjson
from shmq.remoting.admin_bodies import queue_table
from shmq.remoting.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection, RemotingServer

log = logging.getLogger(__name__)

Rc = ResponseCode

DEFAULT_QUERY_NUM = 64
MAX_QUERY_NUM = 1024  # messages one QUERY_MESSAGE_BY_TIME answers at most
SHM_CLIENT_ADDR = "shared memory"  # a ring producer's clientAddr in connection lists
CALL_CLIENT_TIMEOUT_S = 5.0  # a consumer asked for its running info, or to consume, answers within


class AdminBrokerProcessor:
    """The codes ``register`` lists; the other admin codes are its parts' (``admin``)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.consumers = ctx.consumers
        self.groups = ctx.subscription_groups
        # the config's DataVersion (4.9's fields): counts UPDATE_BROKER_CONFIG's changes
        self._config_version = {"counter": 0, "timestamp": int(time.time() * 1000)}
        self._config_lock = threading.Lock()  # one update at a time (RocketMQ: synchronized)

    def register(self, server: RemotingServer) -> None:
        handlers = {
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connection,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connection,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.consumer_running_info,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_sub_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_sub_groups,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_sub_group,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.VIEW_BROKER_STATS_DATA: self.broker_stats_data,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by_who,
            RequestCode.QUERY_MESSAGE_BY_TIME: self.query_by_time,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.all_consumer_offsets,
            RequestCode.GET_ALL_DELAY_OFFSET: self.all_delay_offsets,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commitlog,
        }
        for code, handler in handlers.items():
            server.register(code, handler)

    # -- store lookups --------------------------------------------------------------------------

    def _offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms`` (the max offset when none;
        never below the min offset)."""
        store = self.ctx.store
        return max(store.offset_by_time(topic, queue_id, timestamp_ms),
                   store.min_offset(topic, queue_id))  # fmt: skip

    def _store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """The store time of the message at ``offset``; 0 when there is none."""
        if offset < 0:
            return 0
        return self.ctx.store.store_timestamp(topic, queue_id, offset) or 0

    # -- statistics -----------------------------------------------------------------------------

    def topic_stats(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Per queue: min and max offset, and the store time of the last message."""
        topic = request.ext_topic()
        cfg = existing_topic(self.ctx, topic)
        name = self.ctx.config.broker_name
        rows = []
        for qid in range(cfg.write_queue_nums):
            max_offset = self.ctx.store.max_offset(topic, qid)
            stats = {
                "lastUpdateTimestamp": self._store_timestamp(topic, qid, max_offset - 1),
                "maxOffset": max_offset,
                "minOffset": min(self.ctx.store.min_offset(topic, qid), max_offset),
            }
            rows.append((topic, name, qid, stats))
        return fastjson_response(request, {"offsetTable": queue_table(rows)})

    def consume_stats(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Per queue of the group's topics (or of ``topic``): the broker's max offset, the
        group's committed offset (0 when none, as RocketMQ) and the store time of the last
        consumed message. A topic that online members do not subscribe is left out.
        ``consumeTps``: messages the group read per second over the last minute
        (``rates``)."""
        group = request.ext_group("consumerGroup")
        topic = request.ext_fields.get("topic")
        rows = self._consume_rows(group, [topic] if topic else None)
        tps = sum(self.ctx.rates.consume_tps(group, t) for t in {row[0] for row in rows})
        return fastjson_response(request, {"consumeTps": tps, "offsetTable": queue_table(rows)})

    def broker_stats_data(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin ``viewBrokerStatsData`` and ``statsAll``: one statistic's minute, hour
        and day (``stats_items``); one not counted since the broker started answers
        SYSTEM_ERROR with RocketMQ's remark."""
        name, key = request.ext("statsName"), request.ext("statsKey")
        data = self.ctx.stats_items.stats_data(name, key)
        if data is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return fastjson_response(request, data)

    def broker_consume_stats(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin brokerConsumeStats: ``ConsumeStatsList``, the consume stats of every
        subscription group on each topic it has offsets on (with ``isOrder``, ordered
        topics only), and the total lag. Groups that only committed offsets are listed too
        (RocketMQ lists its subscription groups, which every consumer's heartbeat creates;
        a shmq ``QueueReader`` commits without one)."""
        order_only = _bool(request.ext_fields.get("isOrder"))
        rates = self.ctx.rates
        stats, total = [], 0
        for group in sorted(self.groups.all().keys() | self.ctx.offsets.groups()):
            rows = self._consume_rows(group, None, order_only)
            by_topic: dict[str, list] = {}
            for row in rows:
                by_topic.setdefault(row[0], []).append(row)
                total += row[3]["brokerOffset"] - row[3]["consumerOffset"]
            stats.append({group: [{"consumeTps": rates.consume_tps(group, topic),
                                   "offsetTable": queue_table(t)}
                                  for topic, t in by_topic.items()]})  # fmt: skip
        body = {"brokerAddr": self.ctx.address, "consumeStatsList": stats, "totalDiff": total}
        return fastjson_response(request, body)

    def _consume_rows(
        self, group: str, topics: list[str] | None, order_only: bool = False
    ) -> list[tuple[str, str, int, dict[str, int]]]:
        """``(topic, broker, queue id, OffsetWrapper)`` of ``group`` on ``topics`` (None:
        those it has offsets on), as RocketMQ counts them: topics the broker lacks, and
        those online members do not subscribe to, left out."""
        info = self.consumers.group_info(group)
        subscribed = set(info["subscriptionTable"]) if info else set()
        rows = []
        for name in self.ctx.offsets.topics_of_group(group) if topics is None else topics:
            cfg = self.ctx.topics.get(name)
            if cfg is None or (subscribed and name not in subscribed) or (
                    order_only and not cfg.order):  # fmt: skip
                continue
            for qid in range(cfg.read_queue_nums):
                consumer_offset = max(self.ctx.offsets.query(group, name, qid), 0)
                wrapper = {
                    "brokerOffset": self.ctx.store.max_offset(name, qid),
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": self._store_timestamp(name, qid, consumer_offset - 1),
                }
                rows.append((name, self.ctx.config.broker_name, qid, wrapper))
        return rows

    def consumer_connection(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group = request.ext_group("consumerGroup")
        info = self.consumers.group_info(group)
        if info is None:
            raise ResponseError(
                Rc.CONSUMER_NOT_ONLINE,
                f"the consumer group [{group}] is not online on broker"
                f" {self.ctx.config.broker_name}",
            )
        return json_response(request, info)

    def producer_connection(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """RocketMQ's ``ProducerConnection`` of a group (mqadmin producerConnection)."""
        group = request.ext_group("producerGroup")
        members = self._producer_connections(group)
        if not members:
            raise ResponseError(Rc.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return json_response(request, {"connectionSet": members})

    def _producer_connections(self, group: str) -> list[dict[str, Any]]:
        """RocketMQ's ``Connection`` of each producer of ``group``: those that heartbeat
        over TCP, then this host's processes that hold a producer ring and do not
        (``clientId`` ``ip@pid``, as RocketMQ's default instance name, ``clientAddr``
        naming the shared-memory transport)."""
        members = self.ctx.producers.channels(group)
        beating = {m["clientId"].partition("@")[2].partition("#")[0] for m in members}
        host = self.ctx.config.broker_ip1
        for pid in self.ctx.clients.producer_pids(group):
            if str(pid) not in beating:
                members.append({"clientId": f"{host}@{pid}", "clientAddr": SHM_CLIENT_ADDR,
                                "language": LanguageCode.PYTHON.name, "version": 0})  # fmt: skip
        return members

    def broker_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Every broker and store key with its value, as properties text (mqadmin
        getBrokerConfig); ``version`` in the header."""
        body = to_properties(self.ctx.config, changed_only=False).encode()
        version = fastjson.dumps(self._config_version)
        return RemotingCommand.response_to(request, ext_fields={"version": version}, body=body)

    def update_broker_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin updateBrokerConfig: the body's keys (properties text), as
        ``config_updates`` takes them; a ``brokerPermission`` change is registered at once."""
        if not request.body:
            return RemotingCommand.response_to(request)
        try:
            text = bytes(request.body).decode("utf-8")
        except UnicodeDecodeError:
            raise ResponseError(Rc.SYSTEM_ERROR, "string2Properties error: the body is not "
                                "UTF-8 properties text") from None  # fmt: skip
        with self._config_lock:
            try:
                update = ConfigUpdate(self.ctx.config, text)
            except ConfigError as exc:
                raise ResponseError(Rc.SYSTEM_ERROR, str(exc)) from None
            if update.black_listed:
                raise ResponseError(Rc.NO_PERMISSION, f"{BLACK_LIST_REMARK} "
                                    f"({', '.join(update.black_listed)})")  # fmt: skip
            path = self.ctx.config.broker_config_path
            if update.later:
                if not path:
                    raise ResponseError(Rc.SYSTEM_ERROR, f"{', '.join(sorted(update.later))} "
                                        "act only when the broker starts, and it was started "
                                        "without a config file to keep them in")  # fmt: skip
                try:
                    persist_config(path, update.later)
                except (OSError, ConfigError) as exc:  # ConfigError: the file no longer reads
                    raise ResponseError(Rc.SYSTEM_ERROR, f"cannot write {path}: {exc}") from None
            permission = self.ctx.config.broker_permission
            self.ctx.config = update.config
            self._config_version = {"counter": self._config_version["counter"] + 1,
                                    "timestamp": int(time.time() * 1000)}  # fmt: skip
        log.info("broker config updated: %s", text.strip().replace("\n", ", "))
        if update.config.broker_permission != permission:
            self.ctx.topics.next_version()
            self.ctx.namesrv.register_now()
        return RemotingCommand.response_to(request, remark=update.remark(path))

    def consumer_running_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Ask one online member of a group for its ``ConsumerRunningInfo``."""
        return self._call_consumer(request, dict(request.ext_fields), request.body)

    def consumer_status(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin ``getConsumerStatus`` (RocketMQ's ``Broker2Client.getConsumeStatus``):
        ask each online member of ``group`` (only ``clientAddr``, a client id, when given)
        for its offsets on ``topic`` (GET_CONSUMER_STATUS_FROM_CLIENT) and answer them by
        client id (``GetConsumerStatusBody.consumerTable``). A member that fails to answer
        is left out and logged, as RocketMQ does."""
        topic, group = request.ext_topic(), request.ext_group("group")
        origin = request.ext_fields.get("clientAddr") or None
        members = self.consumers.client_ids(group)
        if not members:
            raise ResponseError(
                Rc.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{group}]"
            )
        table: dict[str, Any] = {}
        for client_id in members if origin is None else [c for c in members if c == origin]:
            conn = self.consumers.connection_of(group, client_id)
            asked = RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group}
            )
            try:
                answer = conn.invoke(asked, CALL_CLIENT_TIMEOUT_S) if conn else None
                if answer is not None and answer.code == Rc.SUCCESS and answer.body:
                    table[client_id] = answer.json_body()["messageQueueTable"]
            except (RemotingError, KeyError, TypeError) as exc:
                log.warning("consumer status of %s in group %s: %s", client_id, group, exc)
        return fastjson_response(request, {"consumerTable": table, "messageQueueTable": {}})

    def consume_message_directly(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        """Have one online member of a group consume the stored message ``msgId`` (an
        offset message id) now, and answer its ``ConsumeMessageDirectlyResult``."""
        request.ext_group("consumerGroup")  # the header's required field, checked first
        _, offset = parse_offset_msg_id(request.ext("msgId"))
        record = self.ctx.store.record_bytes(offset)
        if record is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"no message at CommitLog offset {offset}")
        fields = {**request.ext_fields, "brokerName": self.ctx.config.broker_name}
        return self._call_consumer(request, fields, record)

    def _call_consumer(
        self, request: RemotingCommand, fields: dict, body: bytes
    ) -> RemotingCommand:
        """Pass ``request`` (as ``fields`` and ``body``) to the member it names over the
        connection the member heartbeats on, and answer with what it answers (RocketMQ's
        ``callConsumer``: SYSTEM_ERROR when it is not online, CONSUME_MSG_TIMEOUT when it
        does not answer in time)."""
        group = request.ext_group("consumerGroup")
        client_id = request.ext("clientId")
        conn = self.consumers.connection_of(group, client_id)
        if conn is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        asked = RemotingCommand.request(request.code, fields, body)
        try:
            answer = conn.invoke(asked, CALL_CLIENT_TIMEOUT_S)
        except RemotingTimeoutError as exc:
            raise ResponseError(
                Rc.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}"
            ) from None
        except RemotingError as exc:
            raise ResponseError(
                Rc.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            ) from None
        return RemotingCommand.response_to(request, answer.code, answer.remark, body=answer.body)

    def consumed_by_who(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """The groups with offsets on the topic or online members subscribing it."""
        topic = request.ext_topic()
        groups = set(self.consumers.groups_of_topic(topic))
        groups |= set(self.ctx.offsets.groups_of_topic(topic))
        return json_response(request, {"groupList": sorted(groups)})

    # -- subscription groups --------------------------------------------------------------------

    def update_sub_group(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        data = request.json_body()
        if data is None:
            raise ResponseError(
                Rc.SYSTEM_ERROR,
                "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP needs a SubscriptionGroupConfig JSON body",
            )
        cfg = SubscriptionGroupConfig.from_json(data)
        self.groups.update(cfg)
        self.groups.persist()
        log.info("subscription group %s updated: %s", cfg.group_name, cfg)
        return RemotingCommand.response_to(request)

    def all_sub_groups(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return json_response(request, self.groups.to_wrapper_json())

    def delete_sub_group(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group = request.ext_group("groupName")
        if not self.groups.delete(group):
            raise ResponseError(
                Rc.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group {group} does not exist on broker"
                f" {self.ctx.config.broker_name}",
            )
        self.groups.persist()
        if _bool(request.ext_fields.get("removeOffset")) and self.ctx.offsets.remove_group(group):
            self.ctx.offsets.persist()
        log.info("subscription group %s deleted", group)
        return RemotingCommand.response_to(request)

    def delete_expired_commitlog(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (RocketMQ 5's mqadmin ``deleteExpiredCommitLog``): the
        cleaner deletes expired CommitLog files at once and in its next rounds whatever
        ``deleteWhen`` says (``fileReservedTime`` still decides which are expired);
        answered at once, as RocketMQ answers."""
        words = self.ctx.counters.words
        cn.publish(words, cn.MANUAL_DELETES, cn.load(words, cn.MANUAL_DELETES) + 1)
        self.ctx.agents.wake("cleaner")
        return RemotingCommand.response_to(request)

    # -- what a slave copies (slave_sync) --------------------------------------------------------

    def all_consumer_offsets(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """consumerOffset.json's text: ``{"offsetTable":{"T@G":{0:12}}}`` (fastjson, bare
        queue ids, as RocketMQ's ``ConsumerOffsetManager.encode``)."""
        return RemotingCommand.response_to(request, body=self.ctx.offsets.encode().encode())

    def all_delay_offsets(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """delayOffset.json's text as the schedule agent last persisted it (shortly after
        its deliveries): ``{"offsetTable":{1:0,3:17}}`` and shmq's resume fields; an empty
        table when it has persisted none yet."""
        path = os.path.join(self.ctx.root, "config", DELAY_OFFSET_FILE)
        text = json_file.load(path, str) or '{"offsetTable":{}}'
        return RemotingCommand.response_to(request, body=text.encode())

    # -- offset reset ---------------------------------------------------------------------------

    def clone_group_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """mqadmin cloneGroupOffset: ``destGroup`` gets a copy of ``srcGroup``'s committed
        offsets on ``topic`` (none given: on every topic ``srcGroup`` has offsets on), as
        RocketMQ's broker does, skipping a topic the broker does not have and, unless
        ``offline``, one the online source group does not subscribe to. (RocketMQ's broker
        clones the header's topic in that loop, so without one it clones nothing.) Online
        members of ``destGroup`` commit their own offsets over the copy, as in RocketMQ."""
        src, dest = request.ext_group("srcGroup"), request.ext_group("destGroup")
        topic = request.ext_fields.get("topic") or ""
        offline = _bool(request.ext_fields.get("offline"))
        offsets = self.ctx.offsets
        online = None if offline else self.consumers.group_info(src)
        subscribed = set(online["subscriptionTable"]) if online else set()
        cloned = []
        for t in [topic] if topic else offsets.topics_of_group(src):
            if self.ctx.topics.get(t) is None:
                log.warning("clone of %s offsets to %s: topic %s does not exist", src, dest, t)
            elif subscribed and t not in subscribed:
                log.warning("clone of %s offsets to %s: the group does not subscribe to %s",
                            src, dest, t)  # fmt: skip
            elif offsets.clone(src, dest, t):
                cloned.append(t)
        if cloned:
            offsets.persist()
            log.info("offsets of %s cloned to %s on %s", src, dest, ", ".join(cloned))
        return RemotingCommand.response_to(request)

    def reset_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Move the group's offsets on the topic to the first message stored at or after
        ``timestamp`` (-1: the max offset): always with ``isForce``, else only where that
        is behind the committed offset. Commits them, tells the online members (oneway
        RESET_CONSUMER_CLIENT_OFFSET) and answers the resulting offset table.
        CONSUMER_NOT_ONLINE (as RocketMQ) when the group has neither offsets on the topic
        here nor a member online."""
        topic, group = request.ext_topic(), request.ext_group("group")
        timestamp = request.ext_int("timestamp")
        force = _bool(request.ext_fields.get("isForce"))
        cfg = existing_topic(self.ctx, topic)
        offsets = self.ctx.offsets
        committed = offsets.offsets(group, topic)
        if not committed and self.consumers.group_info(group) is None:
            raise ResponseError(
                Rc.CONSUMER_NOT_ONLINE,
                f"the consumer group {group} has no offsets on topic {topic} and no consumer"
                f" online on broker {self.ctx.config.broker_name}: nothing to reset",
            )
        name = self.ctx.config.broker_name
        table = []
        for qid in range(cfg.read_queue_nums):
            target = (
                self.ctx.store.max_offset(topic, qid)
                if timestamp == -1
                else self._offset_by_time(topic, qid, timestamp)
            )
            current = committed.get(qid, -1)
            if force or current < 0 or target < current:
                offsets.commit(group, topic, qid, target)
                current = target
            table.append((topic, name, qid, current))
        offsets.persist()
        body = fastjson.dumps({"offsetTable": queue_table(table)}).encode()
        notice = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            {"topic": topic, "group": group, "timestamp": timestamp, "isForce": force},
            body,
            oneway=True,
        )
        told = self.consumers.tell(group, notice)
        log.info(
            "offsets of group %s on %s reset to %d (force %s): %s; %d consumer(s) told",
            group, topic, timestamp, force, [row[3] for row in table], told,
        )  # fmt: skip
        return RemotingCommand.response_to(
            request, ext_fields={"consumersNotified": told}, body=body
        )

    # -- query by time --------------------------------------------------------------------------

    def query_by_time(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Messages of ``topic`` stored in ``[beginTimestamp, endTimestamp]`` ms, the
        earliest ``maxNum`` (at most ``MAX_QUERY_NUM``), ordered by store time."""
        topic = request.ext_topic()
        begin = _int_field(request, "beginTimestamp", 0)
        end = _int_field(request, "endTimestamp", int(time.time() * 1000) + 1000)
        max_num = max(1, min(_int_field(request, "maxNum", DEFAULT_QUERY_NUM), MAX_QUERY_NUM))
        cfg = existing_topic(self.ctx, topic)
        found: list[MessageExt] = []
        for qid in range(cfg.read_queue_nums):
            low = self._offset_by_time(topic, qid, begin)
            high = self._offset_by_time(topic, qid, end + 1)
            found += self.ctx.store.read(topic, qid, low, min(high, low + max_num))
        found = sorted(
            (m for m in found if begin <= m.store_timestamp <= end),
            key=lambda m: (m.store_timestamp, m.physical_offset),
        )[:max_num]
        return json_response(request, {"messages": [message_to_json(m) for m in found]})


def _bool(text: str | None) -> bool:
    return text is not None and text.strip().lower() == "true"


def _int_field(request: RemotingCommand, name: str, default: int) -> int:
    if name not in request.ext_fields:
        return default
    return request.ext_int(name)
