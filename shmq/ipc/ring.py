"""Descriptor of a producer ring: an SPSC byte ring of CommitLog records plus completions.

One ring per producer. The producer encodes whole RocketMQ records into the data area with
the numba codec (PHYSICALOFFSET set to the record's absolute ring position, so the writer can
validate framing with the same parser it uses for the CommitLog); a record never wraps: the
rest of a lap is closed with an end-of-file blank record. The writer validates, appends and
answers each record in the completion area, indexed by record sequence number::

    byte 0     line 0  fixed    MAGIC  CAPACITY  SLOTS
    byte 64    line 1  producer TAIL (bytes published)  SEQ_TAIL (records published)
    byte 128   line 2  writer   HEAD (bytes consumed)   SEQ_HEAD (records answered)
                                FENCED (a FENCE_* code once the writer stopped serving the ring)
    byte 192   line 3  writer   COMMIT_HEAD  COMMIT_SEQ  COMMIT_WOFF  (append journal)
    byte 256   data     CAPACITY bytes (a power of two)
    then       completions  SLOTS x 32 bytes: STATUS|REASON<<16|QUEUE_ID<<32, QUEUE_OFFSET,
                            PHYSICAL_OFFSET, STORE_TIMESTAMP

The whole segment is writable by the producer, so the writer trusts none of it: the geometry
is checked against the segment's real size once, at attach, and every pass checks that TAIL
and SEQ_TAIL describe at most one ring of bytes and of completion slots ahead of what it
consumed. A ring that breaks a rule is fenced: the writer answers nothing more from it, sets
FENCED and wakes the producer, whose sends then fail naming the rule; other rings go on.

The journal makes a restarted writer exactly-once: before publishing the CommitLog write
offset that covers a ring's records, the writer notes where the ring will stand after them;
if that write offset was published, a new writer resumes the ring from the journal. A ring
the broker stops serving after its writer died (fenced: the writer died twice reading it) is
settled from the journal first (``settle_journal``): the records the dead writer stored are
answered, so its producer retries only what is not in the CommitLog.
"""

from __future__ import annotations

import numpy as np

from shmq.errors import ShmqError
from shmq.ipc.segment import CACHE_LINE

W = CACHE_LINE // 8
# the int64 words of a ring: its numpy view, or a ``memoryview.cast("q")`` of its mapping
# where a hot loop reads and stores them (no numpy scalar per access)
Words = np.ndarray | memoryview
MAGIC_VALUE = 0x53484D51_52494E01  # "SHMQRIN" v1
MAGIC, CAPACITY, SLOTS = 0, 1, 2
TAIL, SEQ_TAIL = W, W + 1
HEAD, SEQ_HEAD, FENCED = 2 * W, 2 * W + 1, 2 * W + 2
COMMIT_HEAD, COMMIT_SEQ, COMMIT_WOFF = 3 * W, 3 * W + 1, 3 * W + 2
DATA = 4 * CACHE_LINE
COMPLETION_SIZE = 32
MIN_CAPACITY = 64 * 1024

# completion STATUS values (RocketMQ SendStatus / PutMessageStatus for the broker side)
SEND_OK = 1
FLUSH_DISK_TIMEOUT = 2
REJECTED = 3
# REASON values for REJECTED records; texts in REASONS
REASON_NONE = 0
REASON_TOPIC_NOT_EXIST = 1
REASON_NO_PERMISSION = 2
REASON_QUEUE_ID = 3
REASON_TOO_LARGE = 4
REASON_SYSFLAG = 5
REASON_SERVICE_NOT_AVAILABLE = 6
REASON_CORRUPT = 7
REASON_ACL = 8
REASONS = {
    REASON_NONE: "",
    REASON_TOPIC_NOT_EXIST: "topic does not exist and autoCreateTopicEnable is false",
    REASON_NO_PERMISSION: "the topic is not writable on this broker",
    REASON_QUEUE_ID: "queue id is not below the topic's writeQueueNums",
    REASON_TOO_LARGE: "body is larger than maxMessageSize",
    REASON_SYSFLAG: "sysflag not supported here (IPv6 store host, PREPARED or ROLLBACK type)",
    REASON_SERVICE_NOT_AVAILABLE: "the broker cannot store messages now",
    REASON_CORRUPT: "the producer ring holds bytes that are not a valid record",
    REASON_ACL: "the producer's account may not publish to the topic (plain_acl.yml)",
}

# FENCED values: why the writer stopped serving a ring
FENCE_NONE = 0
FENCE_GEOMETRY = 1
FENCE_TAIL = 2
FENCE_SEQ = 3
FENCE_CRASH = 4
FENCES = {
    FENCE_GEOMETRY: "its MAGIC, CAPACITY or SLOTS word does not match the segment",
    FENCE_TAIL: "TAIL is behind HEAD or more than one ring ahead of it",
    FENCE_SEQ: "SEQ_TAIL does not match the records published",
    FENCE_CRASH: "the writer agent died twice while reading it",
}

assert DATA % CACHE_LINE == 0 and COMMIT_WOFF < DATA // 8


def segment_size(capacity: int, slots: int) -> int:
    return DATA + capacity + slots * COMPLETION_SIZE


def check_geometry(capacity: int, slots: int) -> None:
    if capacity < MIN_CAPACITY or capacity & (capacity - 1):
        raise ShmqError(f"ring size {capacity} must be a power of two >= {MIN_CAPACITY}")
    if slots < 16 or slots & (slots - 1):
        raise ShmqError(f"ring slots {slots} must be a power of two >= 16")


def init(words: np.ndarray, capacity: int, slots: int) -> None:
    check_geometry(capacity, slots)
    words[: DATA // 8] = 0
    words[CAPACITY] = capacity
    words[SLOTS] = slots
    words[MAGIC] = MAGIC_VALUE


def geometry(words: np.ndarray, segment_bytes: int | None = None) -> tuple[int, int]:
    """``(capacity, slots)`` of an initialised ring; with ``segment_bytes`` (the writer's
    check of a segment it does not trust), also that they describe a ring of that size."""
    if int(words[MAGIC]) != MAGIC_VALUE:
        raise ShmqError("producer ring has the wrong magic (not initialised by a broker)")
    capacity, slots = int(words[CAPACITY]), int(words[SLOTS])
    if segment_bytes is not None:
        check_geometry(capacity, slots)
        if segment_size(capacity, slots) > segment_bytes:
            raise ShmqError(
                f"producer ring of {capacity} bytes and {slots} slots does not fit its "
                f"segment of {segment_bytes} bytes"
            )
    return capacity, slots


def data(buf: np.ndarray, capacity: int) -> np.ndarray:
    return buf[DATA : DATA + capacity]


def completions(buf: np.ndarray, capacity: int, slots: int) -> np.ndarray:
    """The completion area as an int64 ``(slots, 4)`` array."""
    start = DATA + capacity
    return buf[start : start + slots * COMPLETION_SIZE].view(np.int64).reshape(slots, 4)


# -- producer side ----------------------------------------------------------------------------


def publish_tail(words: Words, tail: int, seq_tail: int) -> None:
    """Producer: records up to ``tail`` bytes / ``seq_tail`` records are complete."""
    words[SEQ_TAIL] = seq_tail
    words[TAIL] = tail


def load_head(words: Words) -> tuple[int, int]:
    """Producer: ``(HEAD, SEQ_HEAD)``; completions below SEQ_HEAD are written."""
    seq = int(words[SEQ_HEAD])
    return int(words[HEAD]), seq


def unpack_completion(row: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """``(status, reason, queue_id, queue_offset, physical_offset, store_timestamp)``."""
    packed = int(row[0])
    return (
        packed & 0xFFFF,
        (packed >> 16) & 0xFFFF,
        packed >> 32,
        int(row[1]),
        int(row[2]),
        int(row[3]),
    )


# -- writer side ------------------------------------------------------------------------------


def load_tail(words: Words) -> tuple[int, int]:
    """Writer: ``(TAIL, SEQ_TAIL)``, bytes below TAIL are complete records."""
    return int(words[TAIL]), int(words[SEQ_TAIL])


def fence_reason(head: int, seq: int, tail: int, seq_tail: int, capacity: int, slots: int) -> int:
    """Writer: ``FENCE_NONE`` when ``(tail, seq_tail)`` as published by the producer can
    follow the writer's own ``(head, seq)``, else the rule they break."""
    if not head <= tail <= head + capacity:
        return FENCE_TAIL
    if not seq <= seq_tail <= seq + slots:
        return FENCE_SEQ
    return FENCE_NONE


def publish_fence(words: Words, reason: int) -> None:
    words[FENCED] = reason


def load_fence(words: Words) -> str | None:
    """Producer: why the writer fenced this ring, or None while it serves it."""
    code = int(words[FENCED])
    return FENCES.get(code, f"fence code {code}") if code else None


def write_journal(words: Words, head: int, seq: int, write_offset: int) -> None:
    """Writer: the ring stands at ``(head, seq)`` once ``write_offset`` is published. The
    old entry is voided first, so a writer killed between these stores leaves one that is
    not trusted, never the new position beside an old, published write offset."""
    words[COMMIT_WOFF] = 0
    words[COMMIT_HEAD] = head
    words[COMMIT_SEQ] = seq
    words[COMMIT_WOFF] = write_offset


def publish_head(words: Words, head: int, seq_head: int) -> None:
    """Writer: completions below ``seq_head`` are written; ring bytes below ``head`` free."""
    words[HEAD] = head
    words[SEQ_HEAD] = seq_head


def resume_point(words: np.ndarray, published_write_offset: int) -> tuple[int, int]:
    """Where a (re)started writer continues this ring: the journal's position when the
    append it describes was published, else the published head."""
    head, seq = int(words[HEAD]), int(words[SEQ_HEAD])
    woff = int(words[COMMIT_WOFF])
    journal_head, journal_seq = int(words[COMMIT_HEAD]), int(words[COMMIT_SEQ])
    if 0 < woff <= published_write_offset and journal_head > head and journal_seq >= seq:
        head, seq = journal_head, journal_seq
    return head, seq


def settle_journal(words: Words, published_write_offset: int) -> None:
    """Supervisor, before it fences a ring whose writer died (no writer will resume it):
    publish as answered what the dead writer stored from it (``resume_point``; the dead
    writer wrote those completions before its journal). A producer that sees the fence then
    fails and retries only records that are not in the CommitLog; without this, records the
    dead writer stored after its last published head were sent again, and stored twice."""
    head, seq = resume_point(words, published_write_offset)
    publish_head(words, head, seq)
