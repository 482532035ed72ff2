"""The broker's control-plane handlers: client registration, topics, offsets, queries.

The data path never comes here: a producer registers once and gets its ring; a consumer
registers once and gets its wake-up semaphore and the store's location, then reads the
mapped files itself. What is left is rare and small: topic admin, offsets, heartbeats,
lookups and status.
"""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from shmq.broker.client.consumer_manager import ClientChannel
from shmq.broker.ha.status import ha_status
from shmq.broker.processors.send_back import SendBack
from shmq.broker.ring_puts import broker_ring
from shmq.broker.stats.runtime import rocketmq_runtime_table
from shmq.broker.topic.config import TopicConfig
from shmq.codec import record as rec
from shmq.errors import ResponseError, ShmqError
from shmq.ipc import counters as cn
from shmq.ipc import queue_table as qt
from shmq.ipc.host import host_id, path_id
from shmq.ipc.layout import layout_id
from shmq.message import message_to_json
from shmq.names import MAX_GROUP_LENGTH, MAX_TOPIC_LENGTH, name_problem, retry_topic
from shmq.remoting.admin_bodies import kv_table
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection, RemotingServer
from shmq.store.consume_queue import is_blank_unit

SHM_CLIENT_ADDR = "shared memory"  # a ring producer's clientAddr in connection lists

if TYPE_CHECKING:
    from shmq.broker.processors.reply import ReplyMessages
    from shmq.broker.supervisor import Broker

Rc = ResponseCode


class ControlHandlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.client = RemotingClient(connect_timeout=1.0, default_timeout=3.0)
        self.directory = qt.QueueDirectory(broker.queue_seg.buf, broker.queue_seg.words)
        self.maxima = qt.max_offsets(broker.queue_seg.buf)
        self._reader = None
        self._lock = threading.Lock()
        # (topic, queue id) -> (first offset, when listed, MIN_PHYSICAL_OFFSET then)
        self._min_offsets: dict[tuple[str, int], tuple[int, float, int]] = {}
        self.consumers = broker.consumers
        # group -> {client id: its connection, last heartbeat, language and version}
        self.producers: dict[str, dict[str, ClientChannel]] = {}
        self.data_path: list = []  # RocketMQ's send and pull codes over TCP (register)
        self.replies: ReplyMessages | None = None
        self.send_back = SendBack(broker, broker_ring(broker, "shmq-send-back"))

    def register(self, server: RemotingServer) -> None:
        handlers = {
            RequestCode.REGISTER_PRODUCER: self.register_producer,
            RequestCode.UNREGISTER_PRODUCER: self.unregister_client_slot,
            RequestCode.REGISTER_CONSUMER: self.register_consumer,
            RequestCode.UNREGISTER_CONSUMER: self.unregister_client_slot,
            RequestCode.GET_STORE_INFO: self.store_info,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_store_time,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.HEART_BEAT: self.heartbeat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back.handle,
            RequestCode.GET_BROKER_HA_STATUS: self.ha_status,
        }
        for code, handler in handlers.items():
            server.register(code, handler)
        server.on_disconnect(self._disconnected)
        from shmq.broker.processors.admin import AdminHandlers  # imports this module
        from shmq.broker.processors.end_transaction import TransactionHandlers
        from shmq.broker.processors.pull import RemotingPull
        from shmq.broker.processors.reply import ReplyMessages
        from shmq.broker.processors.send import RemotingSend
        from shmq.broker.topic.deletion import TopicDeletion

        AdminHandlers(self.broker, self).register(server)
        TopicDeletion(self).register(server)
        self.broker.queue_locks.register(server)
        TransactionHandlers(self.broker, self).register(server)
        send = RemotingSend(self.broker, self)
        self.data_path = [send, RemotingPull(self.broker, self)]
        for handlers in self.data_path:
            handlers.register(server)
        self.replies = ReplyMessages(self, send)
        self.replies.register(server)

    def close(self) -> None:
        for handlers in self.data_path:
            handlers.close()
        if self.replies is not None:
            self.replies.close()
        self.send_back.ring.close()
        self.client.close()
        if self._reader is not None:
            self._reader.close()

    # -- shared-memory clients --------------------------------------------------------------

    def store_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return _json(request, self._store_info())

    def _store_info(self) -> dict[str, Any]:
        b = self.broker
        store = b.config.store
        return {
            "brokerName": b.config.broker_name,
            "brokerAddr": b.address,
            "storePathRootDir": os.path.abspath(store.store_path_root_dir),
            "hostId": host_id(),
            "storeId": path_id(store.store_path_root_dir),
            "shmLayout": layout_id(),
            "mappedFileSizeCommitLog": store.mapped_file_size_commit_log,
            "consumeQueueFileSize": store.consume_queue_file_size,
            "flushDiskType": store.flush_disk_type,
            "syncFlushTimeout": store.sync_flush_timeout,
            "brokerRole": b.config.broker_role,
            "haSlaveFallbehindMax": b.config.ha_slave_fallbehind_max,
            "maxMessageSize": store.max_message_size,
            "checkProducerCrc": b.config.check_producer_crc,
            "delayLevels": len(store.delay_levels_ms),
            "timerMaxDelaySec": store.timer_max_delay_sec,
            "storeHost": store.store_host,
            "prefix": b.names.prefix,
            "counters": b.names.counters,
            "topics": b.names.topics,
            "queues": b.names.queues,
            "registry": b.names.registry,
            "writerSem": b.names.agent_sem("writer"),
        }

    def register_producer(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        if self.broker.config.is_slave:  # RocketMQ's store refuses puts on a slave so
            raise ResponseError(
                Rc.SERVICE_NOT_AVAILABLE,
                f"broker {self.broker.config.broker_name} (id {self.broker.config.broker_id}) "
                "is a slave: message store is slave mode, so putMessage is forbidden",
            )
        slot = self.broker.clients.register_producer(
            request.ext_int("pid"), request.ext_group("group")
        )
        info = self._store_info()
        info.update(slot=slot.index, gen=slot.gen, ring=slot.segment.name, sem=slot.sem_name)
        return _json(request, info)

    def register_consumer(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        slot = self.broker.clients.register_consumer(
            request.ext_int("pid"), request.ext_group("group")
        )
        info = self._store_info()
        info.update(slot=slot.index, gen=slot.gen, sem=slot.sem_name,
                    gets=self.broker.names.consumer_gets)  # fmt: skip
        return _json(request, info)

    def unregister_client_slot(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        kind = "producer" if request.code == RequestCode.UNREGISTER_PRODUCER else "consumer"
        self.broker.clients.release(kind, request.ext_int("slot"), request.ext_int("gen"))
        return RemotingCommand.response_to(request)

    # -- topics -----------------------------------------------------------------------------

    def update_topic(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic = request.ext_topic()
        fields = request.ext_fields
        current = self.broker.topics.get(topic)
        default_q = self.broker.config.default_topic_queue_nums
        cfg = TopicConfig(
            topic,
            read_queue_nums=int(fields.get("readQueueNums", default_q)),
            write_queue_nums=int(fields.get("writeQueueNums", default_q)),
            perm=int(fields.get("perm", current.perm if current else 6)),
        )
        self.broker.create_topic(cfg)
        return RemotingCommand.response_to(request)

    def forget_min_offsets(self, topic: str) -> None:
        """Drop the min offsets kept of a deleted topic's queues (``min_offset_of``)."""
        for key in [k for k in self._min_offsets if k[0] == topic]:
            del self._min_offsets[key]

    def all_topics(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return _json(request, self.broker.topics.to_wrapper_json())

    # -- offsets ----------------------------------------------------------------------------

    def query_offset(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        """The group's committed offset; without one, RocketMQ 4.9's answer
        (``ConsumerManageProcessor.queryConsumerOffset``): 0 when the queue's min offset is
        0 and its first message is not "in disk", i.e. the queue is empty or that message
        lies within ``accessMessageInMemoryMaxRatio`` % of physical RAM of the CommitLog's
        end (``checkInDiskByConsumeOffset``), so a new group reads a young queue from its
        start whatever its ConsumeFromWhere; QUERY_NOT_FOUND otherwise."""
        topic, queue_id = request.ext_topic(), request.ext_int("queueId")
        offset = self.broker.offsets.query(request.ext_group("consumerGroup"), topic, queue_id)
        if offset >= 0:
            return RemotingCommand.response_to(request, ext_fields={"offset": offset})
        # the GET_MIN_OFFSET answer for the same topic and queue
        low = self.min_offset_of(topic, queue_id)
        first = self._young_queue_start(topic, queue_id, low)
        if first is not None:
            ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            in_memory = ram * self.broker.config.store.access_message_in_memory_max_ratio // 100
            end = cn.load(self.broker.counters.words, cn.WRITE_OFFSET)
            if first < 0 or end - first <= in_memory:
                return RemotingCommand.response_to(request, ext_fields={"offset": low})
        return RemotingCommand.response_to(
            request,
            Rc.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def _young_queue_start(self, topic: str, queue_id: int, low: int) -> int | None:
        """For a queue that still holds its first message, the CommitLog offset of that
        message (-1 when the queue has none yet); None for a queue whose start was cleaned
        up. The first message is at offset 0, or after blank units (``min_offset_of``):
        the one that starts a deleted topic's next life (``topic_purge``)."""
        with self._lock:
            reader = self.store_reader()
            if low > 0:
                before, _ = reader.units(topic, queue_id, low - 1, low)
                if not (before.size and is_blank_unit(int(before["offset"][0]),
                                                      int(before["size"][0]))):  # fmt: skip
                    return None
            if self.max_offset_of(topic, queue_id) <= low:
                return -1
            first, _ = reader.units(topic, queue_id, low, low + 1)
            return int(first["offset"][0]) if first.size else None

    def update_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """Commit an offset of an existing topic's queue: consumerOffset.json only grows with
        the store's own topics, never with whatever names requests carry."""
        group, topic = request.ext_group("consumerGroup"), request.ext_topic()
        queue_id = request.ext_int("queueId")
        cfg = self.broker.topics.get(topic)
        if cfg is None:
            raise ResponseError(Rc.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
        if not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            raise ResponseError(
                Rc.SYSTEM_ERROR, f"queueId {queue_id} is outside topic {topic}'s queues"
            )
        self.broker.offsets.commit(group, topic, queue_id, request.ext_int("commitOffset"))
        return RemotingCommand.response_to(request)

    def max_offset_of(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as reput last published it (0: no such queue yet)."""
        slot = self.directory.slot(topic.encode(), queue_id)
        return int(self.maxima[slot]) if slot >= 0 else 0

    def min_offset_of(self, topic: str, queue_id: int, fresh_within: float = 0.0) -> int:
        """The queue's first offset still stored (``StoreReader.min_offset``).

        ``fresh_within``: seconds an earlier answer may be reused, unless the CommitLog's
        first offset moved since (cleanup, after which reput deletes consume-queue files).
        The pull path uses it: a directory listing per pull cost more than the rest of an
        empty pull, and an answer at most that old only sends a pull below the first file
        to the next file, as a pull racing cleanup would be. Only such answers are kept, and
        a deleted topic's are dropped: an admin request may name any topic and queue id, a
        pull only one that exists."""
        key = (topic, queue_id)
        now = time.monotonic()
        cleaned = int(self.broker.counters.words[cn.MIN_PHYSICAL_OFFSET])
        known = self._min_offsets.get(key)
        if known is not None and now - known[1] < fresh_within and known[2] == cleaned:
            return known[0]
        high = self.max_offset_of(topic, queue_id)
        with self._lock:
            first = self.store_reader().min_offset(topic, queue_id, high, cleaned)
        if fresh_within > 0:
            self._min_offsets[key] = (first, now, cleaned)
        return first

    def unit_at(self, topic: str, queue_id: int, offset: int) -> tuple[int, int] | None:
        """``(CommitLog offset, size)`` of the queue's unit at ``offset``; None where the
        queue holds none."""
        with self._lock:
            units, _ = self.store_reader().units(topic, queue_id, offset, offset + 1)
            return (int(units["offset"][0]), int(units["size"][0])) if units.size else None

    def max_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = self.max_offset_of(request.ext_topic(), request.ext_int("queueId"))
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})

    def min_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = self.min_offset_of(request.ext_topic(), request.ext_int("queueId"))
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})

    def earliest_store_time(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: the store time of the queue's first stored message
        (4.9 answers SYSTEM_ERROR when there is none)."""
        topic, qid = request.ext_topic(), request.ext_int("queueId")
        first = self.min_offset_of(topic, qid)
        stamp = None
        if first < self.max_offset_of(topic, qid):
            with self._lock:
                stamp = self.store_reader().store_timestamp(topic, qid, first)
        if stamp is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"no message stored in {topic}:{qid}")
        return RemotingCommand.response_to(request, ext_fields={"timestamp": stamp})

    def search_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic, qid = request.ext_topic(), request.ext_int("queueId")
        timestamp = request.ext_int("timestamp")
        with self._lock:
            offset = self.store_reader().offset_by_time(
                topic, qid, timestamp, 0, self.max_offset_of(topic, qid)
            )
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})

    # -- queries ----------------------------------------------------------------------------

    def store_reader(self):
        from shmq.store.reader import StoreReader

        if self._reader is None:
            store = self.broker.config.store
            self._reader = StoreReader(
                self.broker.root, store.mapped_file_size_commit_log, store.consume_queue_file_size
            )
        return self._reader

    def view_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = request.ext_int("offset")
        if not 0 <= offset < cn.load(self.broker.counters.words, cn.WRITE_OFFSET):
            raise ResponseError(Rc.SYSTEM_ERROR, f"no message at CommitLog offset {offset}")
        with self._lock:
            msg = self.store_reader().view(offset)
        if msg is None:
            raise ResponseError(Rc.SYSTEM_ERROR, f"no message at CommitLog offset {offset}")
        return _json(request, message_to_json(msg))

    def record_bytes(self, offset: int) -> bytes | None:
        """The whole record at CommitLog ``offset`` (CRC-checked), or None."""
        if not 0 <= offset < cn.load(self.broker.counters.words, cn.WRITE_OFFSET):
            return None
        with self._lock:
            batch = self.store_reader().record_at(offset)
            if batch is None:
                return None
            pos, size = int(batch.rows[0, rec.R_POS]), int(batch.rows[0, rec.R_SIZE])
            return batch.buf[pos : pos + size].tobytes()

    def query_message(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        from shmq.store.index.service import IndexService

        store = self.broker.config.store
        topic, key = request.ext_topic(), request.ext("key")
        max_num = request.ext_int("maxNum")
        begin = int(request.ext_fields.get("beginTimestamp", 0))
        end = int(request.ext_fields.get("endTimestamp", time.time() * 1000 + 1000))
        index = IndexService(
            os.path.join(self.broker.root, "index"),
            store.max_hash_slot_num,
            store.max_index_num,
            store.max_msgs_num_batch,
        )
        try:
            index.load(True, 0)
            offsets = index.query(topic, key, max_num, begin, end)
        finally:
            index.close()
        with self._lock:
            messages = [self.store_reader().view(phys) for phys in offsets]
        found = []
        starts: dict[int, int] = {}  # queue id -> min offset
        for msg in messages:
            if msg is None or msg.topic != topic or key not in (*msg.keys, msg.uniq_key):
                continue
            if msg.queue_id not in starts:
                starts[msg.queue_id] = self.min_offset_of(topic, msg.queue_id)
            if msg.queue_offset >= starts[msg.queue_id]:  # not of a deleted topic's past
                found.append(message_to_json(msg))
        if not found:
            raise ResponseError(Rc.QUERY_NOT_FOUND, f"no message of {topic} with key {key}")
        return _json(request, {"messages": found})

    # -- clients ----------------------------------------------------------------------------

    def heartbeat(self, request: RemotingCommand, conn: Connection) -> RemotingCommand:
        data = request.json_body() or {}
        client_id = str(data.get("clientID", ""))
        if not client_id:
            raise ResponseError(Rc.SYSTEM_ERROR, "HEART_BEAT without a clientID")
        for entry in data.get("consumerDataSet", []):
            _check_name("group", entry.get("groupName"), MAX_GROUP_LENGTH)
            for sub in entry.get("subscriptionDataSet") or []:
                _check_name("topic", sub.get("topic"), MAX_TOPIC_LENGTH)
        for entry in data.get("producerDataSet", []):
            _check_name("group", entry.get("groupName"), MAX_GROUP_LENGTH)
        for entry in data.get("consumerDataSet", []):
            self.consumers.register(client_id, conn, entry, request.language, request.version)
            if entry.get("messageModel") == "CLUSTERING":  # the group and its retry topic
                group_cfg = self.send_back.group_config(entry["groupName"])
                if group_cfg.retry_queue_nums:
                    self.send_back.ensure_topic(
                        retry_topic(entry["groupName"]), group_cfg.retry_queue_nums
                    )
        now = int(time.time() * 1000)
        with self._lock:
            for entry in data.get("producerDataSet", []):
                self.producers.setdefault(entry["groupName"], {})[client_id] = ClientChannel(
                    client_id, conn, now, request.language, request.version
                )
        return RemotingCommand.response_to(request)

    def unregister_client(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        client_id = request.ext("clientID")
        group = request.ext_fields.get("consumerGroup")
        if group:
            self.consumers.unregister(group, client_id)
        group = request.ext_fields.get("producerGroup")
        with self._lock:
            if group and group in self.producers:
                self.producers[group].pop(client_id, None)
        return RemotingCommand.response_to(request)

    def producer_connection_id(self, client_id: str) -> int | None:
        """The connection ``client_id`` heartbeats on as a producer (RocketMQ's
        ``ProducerManager.findChannel``), None when it does not."""
        with self._lock:
            for members in self.producers.values():
                if client_id in members:
                    return members[client_id].conn.id
        return None

    def producer_connections(self, group: str) -> list[dict[str, Any]]:
        """RocketMQ's ``Connection`` of each producer of ``group``: those that heartbeat
        over TCP, then this host's processes that hold a producer ring and do not
        (``clientId`` ``ip@pid``, as RocketMQ's default instance name, ``clientAddr``
        naming the shared-memory transport)."""
        with self._lock:
            members = [ch.to_json() for ch in self.producers.get(group, {}).values()]
        beating = {m["clientId"].partition("@")[2].partition("#")[0] for m in members}
        host = self.broker.config.broker_ip1
        for pid in self.broker.clients.producer_pids(group):
            if str(pid) not in beating:
                members.append({"clientId": f"{host}@{pid}", "clientAddr": SHM_CLIENT_ADDR,
                                "language": LanguageCode.PYTHON.name, "version": 0})  # fmt: skip
        return members

    def consumer_list(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group = request.ext_group("consumerGroup")
        ids = self.consumers.client_ids(group)
        if not ids:
            raise ResponseError(Rc.SYSTEM_ERROR, f"the consumer group {group} has no consumer")
        return _json(request, {"consumerIdList": ids})

    def check_client_config(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: a 4.9 push consumer subscribing by an expression other than
        tags asks before it starts (``checkClientInBroker``). Without property filters
        (RocketMQ's ``enablePropertyFilter``, off by default; shmq has no SQL92) such an
        expression is refused as RocketMQ refuses it, and as a pull naming it is."""
        from shmq.broker.processors.pull import check_expression_type

        body = request.json_body()
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        check_expression_type(sub.get("expressionType") if isinstance(sub, dict) else None)
        return RemotingCommand.response_to(request)

    def _disconnected(self, conn: Connection) -> None:
        self.consumers.connection_closed(conn)
        with self._lock:
            for members in self.producers.values():
                for cid in [c for c, ch in members.items() if ch.conn.id == conn.id]:
                    del members[cid]

    def ha_status(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        return _json(request, ha_status(self.broker))

    def runtime_info(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """RocketMQ's ``KVTable``: the keys mqadmin reads, shmq's numbers as JSON text
        under ``admin_bodies.RUNTIME_KEY``."""
        try:
            stats = self.broker.stats()
            return _json(request, kv_table(rocketmq_runtime_table(self.broker, stats), stats))
        except ShmqError as exc:
            raise ResponseError(Rc.SYSTEM_ERROR, str(exc)) from exc


def _json(request: RemotingCommand, obj: Any) -> RemotingCommand:
    return RemotingCommand.response_to(request, body=RemotingCommand.body_json(obj))


def _check_name(kind: str, name: object, limit: int) -> None:
    """A name from a request body (heartbeats): RocketMQ's rule, or SYSTEM_ERROR naming it."""
    problem = name_problem(kind, name, limit)
    if problem:
        raise ResponseError(Rc.SYSTEM_ERROR, f"HEART_BEAT: {problem}")
