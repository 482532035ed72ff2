"""Descriptor of the broker counters segment: the offsets and flags agents publish.

One int64 per field, each field group on its own 64-byte cache line because different
processes write them::

    line  owner       words
    0     supervisor  MAGIC  STATE  REGISTRY_VERSION  STARTED_MS  SUPERVISOR_PID
                      MASTER_HA_ADDR (a slave: the master's HA address as IPv4 << 16 | port,
                      0 while unknown; from haMasterAddress or the namesrv's answer)
                      CONTROLLER_MODE (1: the broker's role comes from the controller)
                      ACK_ALONE (a SYNC_MASTER in controller mode: 1 while the controller
                      has recorded that no slave is in sync, so sends are acknowledged
                      without a slave's ack; see ``broker.sync_state``)
    1     writer      WRITE_OFFSET  WRITE_TIMESTAMP  MSGS_IN  REJECTED  WRITER_PARKED
                      WRITER_RING  WRITER_RING_GEN (the producer slot + 1 and generation of
                      the ring being read, 0 between rings and from the writer's start:
                      whom the supervisor blames when the writer dies, read before the
                      writer is restarted)
                      WRITER_PARKS (parks so far, raised before WRITER_PARKED is set: a
                      producer posts once per park, not once per record while it sleeps)
    2     flush       FLUSHED_OFFSET  FLUSHED_TIMESTAMP  FLUSH_ERRORS  FLUSHES  FLUSH_PARKED
                      FLUSH_PARKS (as WRITER_PARKS: a SYNC_FLUSH writer posts once per park)
    3     reput       DISPATCHED_OFFSET  MSGS_DISPATCHED  LOGICS_TIMESTAMP  INDEX_TIMESTAMP
                      (written by the process that dispatches: reput, the writer or flush,
                      see dispatchInline)
                      REPUT_PARKED  REPUT_PARKS (as WRITER_PARKS: the writer posts reput once
                      per park, not once per pass while it sleeps)
    4     ha          CONFIRMED_OFFSET (a master: the offset slaves acknowledged sends to,
                      RocketMQ's push2SlaveMaxOffset; see ``broker.ha_service``)  HA_SLAVES
                      (slave connections)  HA_PORT (the port the HA service listens on)
                      HA_CLIENT_ADDR (a slave: its HA connection's own address, packed as
                      MASTER_HA_ADDR, 0 while not connected; the controller names the
                      master's in-sync connections by it). After an HA agent died, the
                      supervisor sets HA_SLAVES to 0 once, before it starts the next one
                      (never while one runs): its connections died with it
    5     writer      TOPIC_REQUEST_SEQ  TOPIC_REQUEST_LEN  then 128 bytes of topic name (5-7),
                      then TOPIC_REQUEST_QUEUES (the sending producer's defaultTopicQueueNums)
                      TOPICS_APPLIED (the topic-table version the writer works with: the
                      deletion records of the topics it lacks are in the CommitLog)
    8     supervisor  TOPIC_REQUEST_DONE  MANUAL_DELETES (mqadmin deleteExpiredCommitLog
                      requests so far: the cleaner's next rounds delete expired CommitLog files
                      whatever ``deleteWhen`` says) CONFIG_VERSION (bumped as the broker's
                      config is replaced: the data server reads its live keys again)
    9     several     store status, one word per owner (rare writes): DISK_FULL (cleaner:
                      disk used over diskMaxUsedSpaceRatio's 90 % rule), DISK_USED_PERMILLE
                      (cleaner), ALLOC_FAILED (writer: a new CommitLog file could not be
                      allocated), FLUSH_FAILED (flush: an fsync failed; sticky until restart),
                      MIN_PHYSICAL_OFFSET (cleaner: the CommitLog's first byte after its last
                      deletion; readers unmap files below it)
    10-15 one line per agent kind: HEARTBEAT_MS  PID  RESTARTS  STOP  RING_SLOT  RING_GEN
                      PARKED  PARKS (the agent writes the first two, PARKED and PARKS, the
                      supervisor the others; RING_SLOT / RING_GEN name the producer slot of
                      an agent that sends through the writer, the schedule agent's; PARKS
                      is counted by the HA agents, as WRITER_PARKS)
    16    schedule    the timing wheel, as the agent works (RocketMQ 5's live timer state, which
                      ``timercheck`` holds only as of a quiet, flushed moment):
                      TIMER_DELIVERED_MS (every message on the wheel due before this wall-clock
                      ms is delivered: the next due time after a pass that left nothing due,
                      else the first slot not wholly delivered; 0 while timers are unused)
                      TIMER_WAITING (messages on the wheel not yet delivered or dropped)
    17    schedule    TIMER_SNAPSHOT: one word per bound of TIMER_BOUNDS_S, the messages of
                      TIMER_WAITING due before that many seconds from the agent's last look
                      and not before the previous bound (the first word also holds those
                      overdue; those due beyond the last bound are in no word)

A counter is published (stored) only after the data it covers is written; x86-64 keeps
stores in program order and aligned 8-byte stores whole, so a reader that loads the counter
and then the data sees complete data.
"""

from __future__ import annotations

import numpy as np

from shmq.errors import ShmqError
from shmq.ipc.segment import CACHE_LINE

W = CACHE_LINE // 8  # int64 words per line
# the counters' int64 words: the segment's numpy view, or a ``memoryview.cast("q")`` of
# its mapping in hot loops (no numpy scalar per access)
Words = np.ndarray | memoryview

MAGIC_VALUE = 0x53484D51_434E5401  # "SHMQCNT" v1
MAGIC, STATE, REGISTRY_VERSION, STARTED_MS, SUPERVISOR_PID, MASTER_HA_ADDR = range(0, 6)
CONTROLLER_MODE, ACK_ALONE = 6, 7
WRITE_OFFSET, WRITE_TIMESTAMP, MSGS_IN, REJECTED, WRITER_PARKED = range(W, W + 5)
WRITER_RING, WRITER_RING_GEN, WRITER_PARKS = W + 5, W + 6, W + 7
FLUSHED_OFFSET, FLUSHED_TIMESTAMP, FLUSH_ERRORS, FLUSHES, FLUSH_PARKED = range(2 * W, 2 * W + 5)
FLUSH_PARKS = 2 * W + 5
DISPATCHED_OFFSET, MSGS_DISPATCHED, LOGICS_TIMESTAMP, INDEX_TIMESTAMP, REPUT_PARKED = range(
    3 * W, 3 * W + 5
)
REPUT_PARKS = 3 * W + 5
CONFIRMED_OFFSET, HA_SLAVES, HA_PORT, HA_CLIENT_ADDR = range(4 * W, 4 * W + 4)
TOPIC_REQUEST_SEQ, TOPIC_REQUEST_LEN = 5 * W, 5 * W + 1
TOPIC_REQUEST_NAME = (5 * W + 2) * 8  # byte offset of the 128-byte name
TOPIC_NAME_MAX = 127
TOPIC_REQUEST_QUEUES = 7 * W + 2
TOPICS_APPLIED = 7 * W + 3
TOPIC_REQUEST_DONE, MANUAL_DELETES, CONFIG_VERSION = 8 * W, 8 * W + 1, 8 * W + 2
DISK_FULL, DISK_USED_PERMILLE, ALLOC_FAILED, FLUSH_FAILED, MIN_PHYSICAL_OFFSET = range(
    9 * W, 9 * W + 5
)

AGENT_KINDS = ("writer", "reput", "flush", "cleaner", "ha", "schedule")
AGENT_LINE0 = 10
HEARTBEAT_MS, PID, RESTARTS, STOP, RING_SLOT, RING_GEN, AGENT_PARKED, AGENT_PARKS = range(8)
TIMER_LINE = AGENT_LINE0 + len(AGENT_KINDS)
TIMER_DELIVERED_MS, TIMER_WAITING = TIMER_LINE * W, TIMER_LINE * W + 1
# RocketMQ 5's ``TimerMetrics.timerDist``: rocketmq_timer_message_snapshot's timer_bound_s
TIMER_BOUNDS_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)
TIMER_SNAPSHOT = (TIMER_LINE + 1) * W
SIZE = (TIMER_LINE + 2) * CACHE_LINE

# STATE values
STATE_STARTING, STATE_RUNNING, STATE_STOPPING = 0, 1, 2

assert TOPIC_REQUEST_NAME + TOPIC_NAME_MAX + 1 <= TOPIC_REQUEST_QUEUES * 8
assert SIZE % CACHE_LINE == 0
assert len(TIMER_BOUNDS_S) <= W


def agent_word(kind: str, field: int) -> int:
    return (AGENT_LINE0 + AGENT_KINDS.index(kind)) * W + field


def refuse_reason(words: np.ndarray) -> str:
    """Why the broker refuses puts now (``""`` when it accepts them): the store status words
    read as the SERVICE_NOT_AVAILABLE remark a client sees."""
    if words[FLUSH_FAILED]:
        return "a flush to disk failed; restart the broker (recovery re-reads the disk)"
    if words[ALLOC_FAILED]:
        return "no disk space for a new CommitLog file"
    if words[DISK_FULL]:
        return f"disk is {int(words[DISK_USED_PERMILLE]) / 10:.1f} % full (over 90 %)"
    return ""


def durable_offset(words: np.ndarray, sync_flush: bool, sync_master: bool) -> int:
    """The CommitLog offset below which a send may be answered SEND_OK: flushed (SYNC_FLUSH)
    and acknowledged by a slave (SYNC_MASTER, unless ACK_ALONE); the write offset when
    neither is asked for. Producers wait on it, and the flush and HA agents (and the
    supervisor, when it sets ACK_ALONE) wake them with it."""
    offset = int(words[WRITE_OFFSET])
    if sync_flush:
        offset = min(offset, int(words[FLUSHED_OFFSET]))
    if sync_master and not words[ACK_ALONE]:
        offset = min(offset, int(words[CONFIRMED_OFFSET]))
    return offset


def slave_ok(words: np.ndarray, end: int, fallbehind_max: int) -> bool:
    """RocketMQ 4.9's ``HAService.isSlaveOK``: a slave is connected and the master's end
    ``end`` is less than ``fallbehind_max`` (haSlaveFallbehindMax) ahead of its ack."""
    return bool(words[HA_SLAVES]) and end - int(words[CONFIRMED_OFFSET]) < fallbehind_max


def pack_address(ip: str, port: int) -> int:
    """An IPv4 address and port as one word (``MASTER_HA_ADDR``)."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return (a << 40) | (b << 32) | (c << 24) | (d << 16) | port


def pack_socket_address(addr: tuple) -> int:
    """A socket address (``getsockname``, ``accept``) packed as ``pack_address``; 0 when it
    is not IPv4."""
    try:
        return pack_address(addr[0], addr[1])
    except (ValueError, IndexError):
        return 0


def unpack_address(word: int) -> str:
    """``ip:port`` of a packed address; ``""`` for 0."""
    if not word:
        return ""
    ip = ".".join(str((word >> s) & 0xFF) for s in (40, 32, 24, 16))
    return f"{ip}:{word & 0xFFFF}"


def init(words: np.ndarray, supervisor_pid: int, now_ms: int) -> None:
    words[: SIZE // 8] = 0
    words[STARTED_MS] = now_ms
    words[SUPERVISOR_PID] = supervisor_pid
    words[MAGIC] = MAGIC_VALUE


def check(words: np.ndarray) -> None:
    if int(words[MAGIC]) != MAGIC_VALUE:
        raise ShmqError("the broker counters segment has the wrong magic (not a shmq broker?)")


def publish(words: Words, field: int, value: int) -> None:
    """Store a counter after the data it covers is written (single writer per field)."""
    words[field] = value


def load(words: Words, field: int) -> int:
    return int(words[field])


def write_topic_request(buf: np.ndarray, words: np.ndarray, topic: bytes, queues: int) -> int:
    """Writer: ask the supervisor to auto-create ``topic`` with ``queues`` queues (what the
    producer asked for, as RocketMQ's send header ``defaultTopicQueueNums``); returns the
    request's sequence. A name longer than the field is refused: it would overwrite the
    words after it."""
    if len(topic) > TOPIC_NAME_MAX:
        raise ShmqError(f"topic name of {len(topic)} bytes; a request holds {TOPIC_NAME_MAX}")
    buf[TOPIC_REQUEST_NAME : TOPIC_REQUEST_NAME + len(topic)] = np.frombuffer(topic, np.uint8)
    words[TOPIC_REQUEST_LEN] = len(topic)
    words[TOPIC_REQUEST_QUEUES] = queues
    seq = int(words[TOPIC_REQUEST_SEQ]) + 1
    words[TOPIC_REQUEST_SEQ] = seq
    return seq


def read_topic_request(buf: np.ndarray, words: np.ndarray) -> tuple[int, bytes, int]:
    """Supervisor: ``(sequence, topic, queues)`` of the latest request."""
    seq = int(words[TOPIC_REQUEST_SEQ])
    n = min(int(words[TOPIC_REQUEST_LEN]), TOPIC_NAME_MAX)
    name = buf[TOPIC_REQUEST_NAME : TOPIC_REQUEST_NAME + n].tobytes()
    return seq, name, int(words[TOPIC_REQUEST_QUEUES])
