"""The consumer's read path on the broker's host: ``StoreReader.fetch_messages`` (one kernel
call choosing the units and parsing their records when they lie in the CommitLog's newest
file) answers as ``fetch`` then ``messages`` do, wherever the records lie."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shmq.message import stored_message
from shmq.store import MessageStore
from shmq.store.fetch import LOCAL, QueueBounds
from shmq.store.reader import StoreReader
from shmq.store.results import GetStatus, parse_tag_filter

FILE_SIZE = 4096  # small CommitLog files: a read spans several of them


def _messages(msgs) -> list[tuple]:
    return [(m.queue_offset, m.physical_offset, m.store_size, m.tags, m.body) for m in msgs]


def _summary(fetch, msgs) -> tuple:
    return (
        fetch.status,
        fetch.next_begin_offset,
        fetch.min_offset,
        fetch.max_offset,
        fetch.phys.tolist(),
        fetch.sizes.tolist(),
        fetch.queue_offsets.tolist(),
        fetch.suggest_slave,
        _messages(msgs),
    )


# A queue of up to 50 messages in small CommitLog files, other queues' records between its
# own, read from an offset mostly inside it (at times past it) with a tag expression
READS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
READ_CASES = {
    "bodies": st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=50),
    "tags": st.lists(st.sampled_from(["A", "B", None]), min_size=50, max_size=50),
    "others": st.lists(st.booleans(), min_size=50, max_size=50),
    "start": st.integers(0, 60),
    "count": st.integers(1, 40),
    "expression": st.sampled_from(["*", "A", "A || B", "C"]),
    "end_at": st.sampled_from(["end", "first file", "none"]),
    "low": st.integers(0, 3),
}


@contextlib.contextmanager
def _queue_reader(tmp_path_factory, bodies, tags, others, end_at):
    """A reader of queue ("T", 0) of a store holding ``bodies``, and the CommitLog end it
    is told of: the CommitLog's last, its first file's end (the records mostly lie after
    it), or none (a reader that knows no end)."""
    root = str(tmp_path_factory.mktemp("store"))
    with MessageStore.open(root, mapped_file_size_commit_log=FILE_SIZE) as store:
        for i, body in enumerate(bodies):
            store.put("T", 0, body, tags=tags[i])
            if others[i]:  # another queue's record between this queue's
                store.put("T", 1, b"other" * 20)
        store.dispatch()
        end = store.max_physical_offset
        reader = StoreReader(root, FILE_SIZE, store.config.consume_queue_file_size)
        try:
            yield reader, {"end": end, "first file": min(end, FILE_SIZE), "none": 0}[end_at]
        finally:
            reader.close()


@READS
@given(**READ_CASES)
def test_fetch_messages_reads_as_fetch_then_messages(
    tmp_path_factory, bodies, tags, others, start, count, expression, end_at, low
):
    with _queue_reader(tmp_path_factory, bodies, tags, others, end_at) as (reader, write_offset):
        bounds = QueueBounds(low, len(bodies), 0, write_offset, FILE_SIZE)
        codes = parse_tag_filter(expression)
        offset = start % (len(bodies) + 2)
        fetch = reader.fetch("T", 0, offset, count, codes, bounds, LOCAL)
        msgs = reader.messages("T", 0, fetch) if fetch.status is GetStatus.FOUND else []
        fast, fast_msgs = reader.fetch_messages("T", 0, offset, count, codes, bounds)
    assert _summary(fast, fast_msgs) == _summary(fetch, msgs)


@READS
@given(**READ_CASES, cleaned=st.sampled_from([0, FILE_SIZE]))
def test_a_queue_tail_reads_as_fetch_messages(
    tmp_path_factory, bodies, tags, others, start, count, expression, end_at, low, cleaned
):
    """``QueueTail.read`` answers what ``fetch_messages`` answers with messages, or with
    none because the tag filter skipped the units it looked at (the next read begins where
    that one's does), and nothing else: None leaves the read to ``fetch_messages``."""
    with _queue_reader(tmp_path_factory, bodies, tags, others, end_at) as (reader, write_offset):
        bounds = QueueBounds(low, len(bodies), cleaned, write_offset, FILE_SIZE)
        codes = parse_tag_filter(expression)
        offset = start % (len(bodies) + 2)
        fetch, msgs = reader.fetch_messages("T", 0, offset, count, codes, bounds)
        read = reader.tail("T", 0).read(offset, count, codes, low, len(bodies), cleaned,
                                        write_offset)  # fmt: skip
    if read is None:
        return
    tail_msgs, next_offset, size = read
    assert fetch.status in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE)
    assert next_offset == fetch.next_begin_offset
    assert _messages(tail_msgs) == _messages(msgs)
    assert size == sum(m.store_size for m in tail_msgs)


def test_units_whose_records_are_gone_are_read_past(tmp_path):
    """Units below the CommitLog's first offset (cleanup) are skipped by the one-call read as
    by the rule: the messages start in the first file still there."""
    root = str(tmp_path)
    with MessageStore.open(root, mapped_file_size_commit_log=FILE_SIZE) as store:
        for _ in range(60):
            store.put("T", 0, b"x" * 100)
        store.dispatch()
        end = store.max_physical_offset
        reader = StoreReader(root, FILE_SIZE, store.config.consume_queue_file_size)
        try:
            bounds = QueueBounds(0, 60, FILE_SIZE, end, FILE_SIZE)  # the first file is gone
            fetch, msgs = reader.fetch_messages("T", 0, 0, 8, None, bounds)
            rule = reader.fetch("T", 0, 0, 8, None, bounds, LOCAL)
            expected = _summary(rule, reader.messages("T", 0, rule))
        finally:
            reader.close()
    first = rule.queue_offsets[0]
    assert rule.phys[0] >= FILE_SIZE and first > 0
    assert [m.queue_offset for m in msgs] == list(range(first, first + 8))
    assert _summary(fetch, msgs) == expected


def test_a_queue_tail_reads_the_newest_messages(tmp_path):
    """Where a consumer that keeps up reads (all of it in the CommitLog's newest file), the
    tail answers, batch by batch and with a tag filter, as ``fetch_messages`` does; an
    offset at the queue's end or before its first is left to ``fetch_messages``."""
    root = str(tmp_path)
    with MessageStore.open(root) as store:
        for i in range(100):
            store.put("T", 0, b"m%d" % i, tags="A" if i % 3 else "B")
        store.dispatch()
        end = store.max_physical_offset
        reader = StoreReader(root, store.config.mapped_file_size_commit_log,
                             store.config.consume_queue_file_size)  # fmt: skip
        try:
            tail = reader.tail("T", 0)
            assert reader.tail("T", 0) is tail
            bounds = QueueBounds(10, 100, 0, end, store.config.mapped_file_size_commit_log)
            for codes in (None, parse_tag_filter("B")):
                offset, seen = 10, []
                while offset < 100:
                    fetch, msgs = reader.fetch_messages("T", 0, offset, 7, codes, bounds)
                    got, offset, _ = tail.read(offset, 7, codes, 10, 100, 0, end)
                    assert offset == fetch.next_begin_offset
                    assert _messages(got) == _messages(msgs)
                    seen += [m.body for m in got]
                assert seen == [b"m%d" % i for i in range(10, 100) if codes is None or i % 3 == 0]
            assert tail.read(100, 7, None, 10, 100, 0, end) is None  # the queue's end
            assert tail.read(9, 7, None, 10, 100, 0, end) is None  # before its first
            assert tail.read(1000, 7, None, 10, 100, 0, end) is None  # past it
        finally:
            reader.close()


def _as_v6(record: bytes) -> bytes:
    """``record`` with IPv6 born and store hosts (16-byte addresses, zero; the encoder
    writes IPv4 ones): the sysflag bits set, 12 bytes more in each host, the size fixed."""
    sysflag = int.from_bytes(record[36:40], "big") | 0x10 | 0x20  # BORNHOST_V6, STOREHOST_V6
    out = (record[4:36] + sysflag.to_bytes(4, "big") + record[40:48] + bytes(12)
           + record[48:64] + bytes(12) + record[64:])  # fmt: skip
    return (len(out) + 4).to_bytes(4, "big") + out


def test_a_message_decodes_ipv4_and_ipv6_hosts(tmp_path):
    """A read message decodes its record with both hosts IPv4 (one unpack) and with IPv6
    ones (each host read where it lies) to the same fields."""
    with MessageStore.open(str(tmp_path)) as store:
        store.put("T", 0, b"body" * 30, tags="A", keys=["k1", "k2"])
        store.dispatch()
        msg, _ = store.reader.read_queue("T", 0, 0, 1, 1)
    v4 = msg[0]
    record = v4._raw[v4._at : v4._at + v4.store_size]
    v6 = stored_message(b"pad" + _as_v6(record), 3, "T", 0, 0, v4.physical_offset,
                        v4.store_size + 24)  # fmt: skip
    assert v6.sysflag == v4.sysflag | 0x30
    assert v6.born_host.startswith("[") and v6.store_host.startswith("[")  # IPv6 text
    for m in (v4, v6):
        assert (m.body, m.tags, m.keys, m.reconsume_times) == (b"body" * 30, "A", ["k1", "k2"], 0)
    assert (v6.born_timestamp, v6.store_timestamp, v6.body_crc, v6.flag) == (
        v4.born_timestamp, v4.store_timestamp, v4.body_crc, v4.flag)  # fmt: skip
    assert v4.born_host.startswith("127.0.0.1:")
