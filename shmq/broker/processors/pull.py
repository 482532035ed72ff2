"""PULL_MESSAGE(11) over TCP: RocketMQ 4.9's ``PullMessageProcessor`` and the store's
``getMessage``, for consumers that are not on the broker's host.

The broker reads the consume queue and the CommitLog through its own read-only mappings,
as shmq's own consumers do. The response body is the stored records back to back, each a
slice copied from the CommitLog mapping (never decoded and encoded again), chosen by 4.9's
rules: at most ``maxMsgNums`` and 4.9's transfer limits (32 messages or 256 KiB of records
near the CommitLog's end, 8 or 64 KiB of records further back, "in disk"), units whose tag
hash is not in the subscription's skipped (at most ``max(800, maxMsgNums)`` units scanned),
and the response codes 4.9 gives each store status (remark: the status's name). A pull
that finds nothing with the suspend bit set is held (``pull_hold``) and answered once the
queue grows or its ``suspendTimeoutMillis`` passes; a pull with the commit bit stores its
``commitOffset`` for the group first. A pull answered with messages counts them as the
group's gets (``get_counts``), as 4.9's ``incGroupGetNums``.

The subscription comes from the request when its sysFlag has the subscription bit, else
from the group's last heartbeat (4.9's push consumer sends it only there).

Which broker the consumer should pull the queue from next (``suggestWhichBrokerId``), as
4.9: with ``slaveReadEnable``, the group's ``whichBrokerWhenConsumeSlowly`` (1) when the
CommitLog bytes after the last unit read exceed ``accessMessageInMemoryMaxRatio`` % of the
host's RAM (the consumer is far behind: let the slave's page cache serve it), else the
group's ``brokerId`` (0); without it, the master (0), and a slave answers every pull with
PULL_RETRY_IMMEDIATELY, no messages and the requested offset as ``nextBeginOffset`` (so a
consumer skips nothing). A slave never stores a pull's ``commitOffset``.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from shmq.broker.processors.pull_hold import HeldPull, PullHold
from shmq.codec.record_copy import copy_owned_records
from shmq.errors import InvalidMessageError
from shmq.ipc import counters as cn
from shmq.remoting.custom_header import INT, LONG, STR, Spec, decode_header
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer
from shmq.store.reader import StoreReader, topic_bytes
from shmq.store.results import parse_tag_filter

if TYPE_CHECKING:
    from shmq.broker.processors.control import ControlHandlers
    from shmq.broker.supervisor import Broker

Rc = ResponseCode

PULL_HEADER: Spec = {
    "consumerGroup": (STR, True), "topic": (STR, True), "queueId": (INT, True),
    "queueOffset": (LONG, True), "maxMsgNums": (INT, True), "sysFlag": (INT, True),
    "commitOffset": (LONG, True), "suspendTimeoutMillis": (LONG, True),
    "subscription": (STR, False), "subVersion": (LONG, True), "expressionType": (STR, False),
}  # fmt: skip
# PullSysFlag
FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
# 4.9's MessageStoreConfig defaults for records read from far behind the CommitLog's end
MAX_TRANSFER_BYTES_ON_MESSAGE_IN_DISK = 64 * 1024
MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK = 8
MIN_FILTER_SCAN = 800  # 4.9 scans max(16000 bytes of units, maxMsgNums units)
MIN_OFFSET_FRESH_S = 1.0  # a queue's first offset, listed at most once a second per queue
# GetMessageStatus -> the response code PullMessageProcessor gives it (on a master)
STATUS_CODES = {
    "FOUND": Rc.SUCCESS,
    "NO_MATCHED_MESSAGE": Rc.PULL_RETRY_IMMEDIATELY,
    "MESSAGE_WAS_REMOVING": Rc.PULL_RETRY_IMMEDIATELY,
    "OFFSET_FOUND_NULL": Rc.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_ONE": Rc.PULL_NOT_FOUND,
    "OFFSET_OVERFLOW_BADLY": Rc.PULL_OFFSET_MOVED,
    "OFFSET_TOO_SMALL": Rc.PULL_OFFSET_MOVED,
}


@dataclass
class GetResult:
    """The store's answer to one read (4.9's ``GetMessageResult``)."""

    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes | memoryview = b""
    count: int = 0  # the messages in ``body``
    # 4.9's suggestPullingFromSlave: the CommitLog bytes after the last unit read exceed
    # accessMessageInMemoryMaxRatio % of RAM (the consumer is far behind)
    suggest_slave: bool = False


class RemotingPull:
    """The pull code, registered next to the control handlers."""

    def __init__(self, broker: Broker, control: ControlHandlers) -> None:
        self.broker = broker
        self.control = control
        store = broker.config.store
        self.reader = StoreReader(
            broker.root, store.mapped_file_size_commit_log, store.consume_queue_file_size
        )
        self.units_per_file = store.consume_queue_file_size // 20
        self.lock = threading.Lock()  # the reader
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        self.memory = ram * store.access_message_in_memory_max_ratio // 100
        self.in_memory = (
            store.max_transfer_count_on_message_in_memory,
            store.max_transfer_bytes_on_message_in_memory,
        )
        self.hold = PullHold(broker, control, self._answer_held)
        warm_up()

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.PULL_MESSAGE, self.handle)

    def close(self) -> None:
        self.hold.close()
        with self.lock:
            self.reader.close()

    def handle(self, request: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        return self._process(request, conn, allow_suspend=True)

    def _answer_held(self, held: HeldPull, final: bool) -> RemotingCommand | None:
        """The hold service's re-run of a held pull: its response, or None to keep holding
        (the queue grew, but with nothing the subscription takes)."""
        try:
            response = self._process(held.request, held.conn, allow_suspend=False)
        except ResponseError as exc:  # e.g. the topic was deleted meanwhile
            return RemotingCommand.response_to(held.request, exc.code, exc.remark)
        if not final and response is not None and response.code == Rc.PULL_RETRY_IMMEDIATELY:
            return None
        return response

    # -- the request ------------------------------------------------------------------------

    def _process(
        self, request: RemotingCommand, conn: Connection, allow_suspend: bool
    ) -> RemotingCommand | None:
        h = decode_header(request, PULL_HEADER)
        group, topic, queue_id = h["consumerGroup"], h["topic"], h["queueId"]
        flags = h["sysFlag"]
        codes = self._check(h)
        result = self.get_message(topic, queue_id, h["queueOffset"], h["maxMsgNums"], codes)
        code = STATUS_CODES.get(result.status)
        if code is None:  # NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
            code = Rc.PULL_OFFSET_MOVED if h["queueOffset"] != 0 else Rc.PULL_NOT_FOUND
        cfg = self.broker.config
        suggest = 0  # MixAll.MASTER_ID
        if cfg.slave_read_enable:
            group_cfg = self.control.send_back.group_config(group)
            slow = result.suggest_slave
            suggest = group_cfg.which_broker_when_consume_slowly if slow else group_cfg.broker_id
        elif cfg.is_slave:  # a slave serves no reads: back to the master, skipping nothing
            code = Rc.PULL_RETRY_IMMEDIATELY
            result = GetResult(result.status, h["queueOffset"], result.min_offset,
                               result.max_offset)  # fmt: skip
        if code == Rc.SUCCESS:
            self.broker.gets.pulled(group, topic, result.count)
        response: RemotingCommand | None = RemotingCommand.response_to(
            request,
            code,
            result.status,
            {
                "suggestWhichBrokerId": suggest,
                "nextBeginOffset": result.next_begin_offset,
                "minOffset": result.min_offset,
                "maxOffset": result.max_offset,
            },
            result.body,
        )
        if code == Rc.PULL_NOT_FOUND and allow_suspend and flags & FLAG_SUSPEND:
            timeout_ms = h["suspendTimeoutMillis"]
            if not self.broker.config.long_polling_enable:
                timeout_ms = self.broker.config.short_polling_time_mills
            held = HeldPull(request, conn, topic, queue_id, h["queueOffset"], timeout_ms)
            if self.hold.suspend(held):
                response = None
        if allow_suspend and flags & FLAG_COMMIT_OFFSET and not cfg.is_slave:
            self.broker.offsets.commit(group, topic, queue_id, h["commitOffset"])
        return response

    def _check(self, h: dict) -> np.ndarray | None:
        """4.9's checks before the read, in its order; the subscription's tag hashes (None:
        every message)."""
        cfg = self.broker.config
        if not cfg.broker_permission & 4:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the broker[{cfg.broker_ip1}] pulling message is forbidden"
            )
        group, topic = h["consumerGroup"], h["topic"]
        if not self.control.send_back.group_config(group).consume_enable:
            raise ResponseError(Rc.NO_PERMISSION, f"subscription group no permission, {group}")
        topic_cfg = self.broker.topics.get(topic)
        if topic_cfg is None:
            raise ResponseError(
                Rc.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        if not topic_cfg.is_readable:
            raise ResponseError(
                Rc.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden"
            )
        if not 0 <= h["queueId"] < topic_cfg.read_queue_nums:
            raise ResponseError(
                Rc.SYSTEM_ERROR,
                f"queueId[{h['queueId']}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{topic_cfg.read_queue_nums}]",
            )
        if h["sysFlag"] & FLAG_SUBSCRIPTION:
            expression, kind = h["subscription"], h["expressionType"]
        else:
            expression, kind = self._group_subscription(group, topic, h["subVersion"])
        check_expression_type(kind)
        try:
            return parse_tag_filter(expression)
        except InvalidMessageError:
            raise ResponseError(Rc.SUBSCRIPTION_PARSE_FAILED,
                                "parse the consumer's subscription failed") from None  # fmt: skip

    def _group_subscription(self, group: str, topic: str, version: int) -> tuple[str, str]:
        info = self.control.consumers.group_info(group)
        if info is None:
            raise ResponseError(Rc.SUBSCRIPTION_NOT_EXIST, "the consumer's group info not exist")
        sub = info["subscriptionTable"].get(topic)
        if sub is None:
            raise ResponseError(Rc.SUBSCRIPTION_NOT_EXIST, "the consumer's subscription not exist")
        if int(sub.get("subVersion", 0)) < version:
            raise ResponseError(
                Rc.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return str(sub.get("subString", "*")), str(sub.get("expressionType") or "TAG")

    # -- the store --------------------------------------------------------------------------

    def get_message(
        self, topic: str, queue_id: int, offset: int, max_nums: int, codes: np.ndarray | None
    ) -> GetResult:
        """4.9's ``DefaultMessageStore.getMessage`` over the published consume queue."""
        max_offset = self.control.max_offset_of(topic, queue_id)
        min_offset = self.control.min_offset_of(topic, queue_id, MIN_OFFSET_FRESH_S)
        if max_offset == 0:
            return GetResult("NO_MESSAGE_IN_QUEUE", 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult("OFFSET_TOO_SMALL", min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult("OFFSET_OVERFLOW_ONE", offset, min_offset, max_offset)
        if offset > max_offset:
            return GetResult("OFFSET_OVERFLOW_BADLY", max_offset, min_offset, max_offset)
        end = min(max_offset, offset + max(MIN_FILTER_SCAN, max_nums))
        with self.lock:
            units, _ = self.reader.units(topic, queue_id, offset, end)
            if units.size == 0:
                next_file = offset - offset % self.units_per_file + self.units_per_file
                return GetResult("OFFSET_FOUND_NULL", next_file, min_offset, max_offset)
            status, scanned, body, count = self._read(
                topic, queue_id, offset, units, max_nums, codes
            )
            last = int(units["offset"][scanned - 1])  # scanned >= 1: units is not empty
        behind = cn.load(self.broker.counters.words, cn.WRITE_OFFSET) - last
        return GetResult(status, offset + scanned, min_offset, max_offset, body, count,
                         behind > self.memory)  # fmt: skip

    def _read(
        self, topic: str, queue_id: int, offset: int, units: np.ndarray, max_nums: int,
        codes: np.ndarray | None,
    ) -> tuple[str, int, bytes | memoryview, int]:  # fmt: skip
        """``(status, units scanned, body, messages in it)`` for ``units``, the queue's from
        ``offset``: the records are checked against their units (topic, queue, queue
        offset) as every consumer's are, then copied as stored."""
        # no response takes more than this many: only these (and the one that stops it) count
        most = min(max_nums, max(self.in_memory[0], MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK))
        if codes is None:
            picked = None
            phys = units["offset"][: most + 1].astype(np.int64)
            sizes = units["size"][: most + 1].astype(np.int64)
        else:  # 4.9 compares (int) tagsCode with the subscription's hashes
            picked = np.flatnonzero(np.isin(units["tags_code"].astype(np.int32), codes))
            phys = units["offset"][picked[: most + 1]].astype(np.int64)
            sizes = units["size"][picked[: most + 1]].astype(np.int64)
        write_end = cn.load(self.broker.counters.words, cn.WRITE_OFFSET)
        count = batch_count(sizes, write_end - phys > self.memory, max_nums, self.in_memory)
        if picked is None:  # every unit is taken: the ones before the stop were scanned
            scanned, chosen = count, np.arange(count, dtype=np.int64)
        else:
            scanned = int(picked[count]) if count < picked.size else units.size
            chosen = picked[:count]
        if not chosen.size:
            return "NO_MATCHED_MESSAGE", scanned, b"", 0
        body, copied = self.reader.copy_records(
            topic, queue_id, phys[:count], sizes[:count], offset + chosen.astype(np.int64)
        )
        if not copied:
            return "MESSAGE_WAS_REMOVING", scanned, b"", 0
        # the frame's encoding copies it once more: hand it over as a view, not a copy
        return "FOUND", scanned, memoryview(body), copied


def check_expression_type(kind: str | None) -> None:
    """Refuse a subscription by anything but tags as RocketMQ 4.9 does without property
    filters (``enablePropertyFilter``, off by default; shmq has no SQL92)."""
    if kind not in (None, "TAG"):
        raise ResponseError(
            Rc.SYSTEM_ERROR, f"The broker does not support consumer to filter message by {kind}"
        )


def warm_up() -> None:
    """Load the kernels that size a response and copy its records (from a read-only
    mapping)."""
    one = np.ones(1, dtype=np.int64)
    batch_count(one, one > 1, 1, (1, 1))
    copy_owned_records(np.frombuffer(b"x", dtype=np.uint8), one - 1, one, one, topic_bytes("T"),
                       0, 0, np.empty(1, dtype=np.uint8), 0)  # fmt: skip


def batch_count(
    sizes: np.ndarray, in_disk: np.ndarray, max_nums: int, in_memory: tuple[int, int]
) -> int:
    """How many of the records of ``sizes`` (in queue order) one response takes: 4.9's
    ``isTheBatchFull`` asked for each next record. The first always goes; a record read
    from far behind the CommitLog's end (``in_disk``) is held to the in-disk limits, any
    other to ``in_memory`` (count, bytes)."""
    return _batch_count(sizes, in_disk, max_nums, in_memory[0], in_memory[1])


@njit(cache=True, nogil=True)
def _batch_count(sizes, in_disk, max_nums, memory_count, memory_bytes):
    total = 0
    for i in range(sizes.shape[0]):
        total += sizes[i]  # the response's bytes with record i
        if i == 0:
            continue
        disk = in_disk[i]
        limit_count = MAX_TRANSFER_COUNT_ON_MESSAGE_IN_DISK if disk else memory_count
        limit_bytes = MAX_TRANSFER_BYTES_ON_MESSAGE_IN_DISK if disk else memory_bytes
        if i >= max_nums or total > limit_bytes or i > limit_count - 1:
            return i
    return sizes.shape[0]
