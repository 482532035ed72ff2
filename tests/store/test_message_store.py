"""MessageStore facade: put/get, batches, rolling, queries, statuses and bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest

from shmq.codec.jhash import java_hash
from shmq.errors import (
    InvalidMessageError,
    InvalidMessageIdError,
    InvalidPropertyError,
    InvalidTopicError,
    MessageTooLargeError,
    StoreClosedError,
    StoreLockedError,
)
from shmq.store import GetStatus, MessageStore, PutStatus
from shmq.store.reader import StoreReader
from shmq.store.results import parse_tag_filter


def test_put_get_round_trip(open_store):
    store = open_store()
    r = store.put("Orders", 1, b"hello", tags="TagA", keys=["k1", "k2"], properties={"a": "b"})
    assert r.ok and r.status is PutStatus.PUT_OK
    assert (r.physical_offset, r.queue_offset) == (0, 0)
    assert len(r.msg_id) == 32
    assert store.dispatch() == 1
    got = store.get("Orders", 1, 0, 10)
    assert got.status is GetStatus.FOUND
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (1, 0, 1)
    [m] = got.messages
    assert (m.topic, m.queue_id, m.queue_offset, m.physical_offset) == ("Orders", 1, 0, 0)
    assert m.body == b"hello" and m.tags == "TagA" and m.keys == ["k1", "k2"]
    assert m.properties["a"] == "b"
    assert m.msg_id == r.msg_id == m.offset_msg_id
    assert m.store_host == "127.0.0.1:10911"
    assert m.store_timestamp == r.store_timestamp
    assert m.born_timestamp <= m.store_timestamp


def test_queue_offsets_are_per_queue_and_dense(open_store):
    store = open_store()
    offsets = [store.put("T", i % 3, b"x%d" % i).queue_offset for i in range(30)]
    assert offsets == [i // 3 for i in range(30)]
    store.dispatch()
    for qid in range(3):
        got = store.get("T", qid, 0, 32)
        assert [m.body for m in got.messages] == [b"x%d" % i for i in range(qid, 30, 3)]


def test_messages_roll_over_files_with_blank_records(open_store):
    store = open_store()
    bodies = [os.urandom(1 + i % 700) for i in range(600)]
    for body in bodies:
        store.put("Roll", 0, body)
    assert len(store.commitlog.queue.files) > 3
    store.dispatch()
    seen, offset = [], 0
    while True:
        got = store.get("Roll", 0, offset, 32)
        if got.status is not GetStatus.FOUND:
            break
        seen += [m.body for m in got.messages]
        offset = got.next_begin_offset
    assert seen == bodies


@pytest.mark.parametrize("form", ["list", "arrays", "arrays_with_crcs"])
def test_put_batch_forms(open_store, form):
    store = open_store()
    bodies = [os.urandom(1 + i % 300) for i in range(500)]
    if form == "list":
        arg = bodies
        crcs = None
    else:
        data = np.frombuffer(b"".join(bodies), dtype=np.uint8)
        offsets = np.zeros(len(bodies) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in bodies], out=offsets[1:])
        arg = (data, offsets)
        crcs = None
        if form == "arrays_with_crcs":
            import zlib

            crcs = np.array([zlib.crc32(b) & 0x7FFFFFFF for b in bodies], dtype=np.int64)
    res = store.put_batch("Bulk", 2, arg, tags="T1", body_crcs=crcs)
    assert res.ok and res.count == 500
    assert list(res.queue_offsets) == list(range(500))
    assert np.all(np.diff(res.physical_offsets) > 0)
    store.dispatch()
    got, offset = [], 0
    while offset < 500:
        r = store.get("Bulk", 2, offset, 32)
        got += r.messages
        offset = r.next_begin_offset
    assert [m.body for m in got] == bodies
    assert all(m.tags == "T1" for m in got)
    assert [m.physical_offset for m in got] == list(res.physical_offsets)
    # the stored CRC is what recovery checks: a full CRC-checked view must succeed
    assert store.view(res.msg_ids[-1]).body == bodies[-1]


def test_put_batch_with_keys_is_indexed(open_store):
    store = open_store()
    keys = [f"order-{i}" if i % 2 else None for i in range(20)]
    store.put_batch("K", 0, [b"v%d" % i for i in range(20)], keys=keys)
    store.dispatch()
    [m] = store.query_by_key("K", "order-7")
    assert m.body == b"v7" and m.keys == ["order-7"]
    assert store.query_by_key("K", "order-8") == []
    assert store.query_by_key("Other", "order-7") == []


def test_query_by_key_newest_first_and_time_range(open_store):
    store = open_store()
    for i in range(5):
        store.put("Q", 0, b"m%d" % i, keys="same", born_timestamp=1000 + i)
    store.dispatch()
    found = store.query_by_key("Q", "same", max_num=3)
    assert [m.body for m in found] == [b"m4", b"m3", b"m2"]
    stamp = found[0].store_timestamp
    assert store.query_by_key("Q", "same", begin_ms=stamp + 5000, end_ms=stamp + 9000) == []


def test_tag_filter_matches_hashes(open_store):
    store = open_store()
    for i in range(40):
        store.put("F", 0, b"%d" % i, tags=("A", "B", "C", "D")[i % 4])
    store.dispatch()
    got = store.get("F", 0, 0, 32, tag_filter="A || C")
    assert got.status is GetStatus.FOUND
    assert {m.tags for m in got.messages} == {"A", "C"}
    assert [int(m.body) for m in got.messages] == [i for i in range(40) if i % 4 in (0, 2)][:32]
    assert store.get("F", 0, 0, 32, tag_filter="*").messages[0].tags == "A"
    none = store.get("F", 0, 0, 32, tag_filter="Z")
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 40


def test_a_tag_filter_looks_at_16000_bytes_of_units_per_read(tmp_path):
    """4.9's getMessage looks at ``max(16000, maxMsgNums * 20)`` bytes of units per read:
    800 units, and the next read begins after them (shmq looked at 16,000 units)."""
    with MessageStore.open(tmp_path / "s", mapped_file_size_commit_log=1 << 20) as store:
        store.put_batch("F", 0, [b"x"] * 2000, tags="A")
        store.dispatch()
        none = store.get("F", 0, 0, 32, tag_filter="B")
        assert (none.status, none.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 800)
        more = store.get("F", 0, 0, 1000, tag_filter="B")  # maxMsgNums units, if more
        assert more.next_begin_offset == 1000
        cfg = store.config
        reader = StoreReader(store.root, cfg.mapped_file_size_commit_log,
                             cfg.consume_queue_file_size)  # fmt: skip
        try:  # the consumers' reader, one read at a time
            assert reader.read_queue("F", 0, 0, 2000, 32, parse_tag_filter("B")) == ([], 800)
        finally:
            reader.close()


def test_tags_code_is_java_hash_in_consume_queue(open_store):
    store = open_store()
    store.put("H", 0, b"x", tags="TagA")
    store.dispatch()
    assert store.consume_queues[("H", 0)].unit(0)[2] == java_hash("TagA") == 2598919


def test_get_statuses_and_corrections(open_store):
    store = open_store()
    assert store.get("None", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(5):
        store.put("S", 0, b"%d" % i)
    store.dispatch()
    one = store.get("S", 0, 5)
    assert (one.status, one.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 5)
    bad = store.get("S", 0, 99)
    assert bad.status is GetStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 0
    small = store.get("S", 0, -3)
    assert small.status is GetStatus.OFFSET_TOO_SMALL and small.next_begin_offset == 0


def test_get_respects_transfer_limits(open_store):
    store = open_store(max_transfer_count_on_message_in_memory=4)
    for i in range(10):
        store.put("L", 0, b"%d" % i)
    store.dispatch()
    got = store.get("L", 0, 0, 100)
    assert len(got.messages) == 4 and got.next_begin_offset == 4
    big = open_store(store_dir_for(store, "big"), max_transfer_bytes_on_message_in_memory=300)
    for _ in range(3):
        big.put("L", 0, b"x" * 200)
    big.dispatch()
    assert len(big.get("L", 0, 0, 32).messages) == 1  # the first message always comes


def store_dir_for(store: MessageStore, name: str) -> str:
    return os.path.join(os.path.dirname(store.root), name)


def test_undispatched_messages_are_not_visible(open_store):
    store = open_store()
    store.put("U", 0, b"a")
    assert store.get("U", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    store.dispatch()
    assert store.dispatch() == 0  # idempotent
    assert store.get("U", 0, 0).status is GetStatus.FOUND


def test_view_by_msg_id(open_store):
    store = open_store()
    ids = [store.put("V", 0, b"body%d" % i).msg_id for i in range(3)]
    assert store.view(ids[1]).body == b"body1"
    assert store.view("7F00000100002A9F00000000000FFFFF") is None
    with pytest.raises(InvalidMessageIdError):
        store.view("not-an-id")
    with pytest.raises(InvalidMessageIdError):
        store.view("Z" * 32)


def test_offset_by_time(open_store):
    store = open_store()
    first = store.put("Time", 0, b"a").store_timestamp
    for _ in range(10):
        store.put("Time", 0, b"b")
    store.dispatch()
    assert store.get_offset_in_queue_by_time("Time", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("Time", 0, first) == 0
    assert store.get_offset_in_queue_by_time("Time", 0, first + 3_600_000) == 11
    assert store.get_offset_in_queue_by_time("Nope", 0, first) == 0


@pytest.mark.parametrize(
    "topic",
    ["", "a b", "a/b", "../x", "t" * 128, "tópico", "a\x00"],
)
def test_bad_topics_are_rejected(open_store, topic):
    store = open_store()
    with pytest.raises(InvalidTopicError, match="topic"):
        store.put(topic, 0, b"x")
    with pytest.raises(InvalidTopicError):
        store.put_batch(topic, 0, [b"x"])
    assert store.max_physical_offset == 0


def test_good_topic_edge_cases(open_store):
    store = open_store()
    for topic in ["%RETRY%g", "a|b", "A-_9", "t" * 127]:
        assert store.put(topic, 0, b"x").ok


def test_bad_bodies_are_rejected(open_store):
    store = open_store(max_message_size=1024)
    with pytest.raises(MessageTooLargeError, match="empty"):
        store.put("B", 0, b"")
    with pytest.raises(MessageTooLargeError, match="1025 bytes, above maxMessageSize 1024"):
        store.put("B", 0, b"x" * 1025)
    with pytest.raises(InvalidMessageError, match="bytes"):
        store.put("B", 0, "text")  # type: ignore[arg-type]
    with pytest.raises(MessageTooLargeError, match="message 1 of the batch"):
        store.put_batch("B", 0, [b"ok", b""])
    with pytest.raises(MessageTooLargeError):
        store.put_batch("B", 0, [b"x" * 2000])
    assert store.put("B", 0, bytearray(b"fine")).ok
    assert store.max_physical_offset > 0


def test_record_larger_than_commitlog_file_is_rejected(open_store):
    store = open_store(mapped_file_size_commit_log=4096)
    with pytest.raises(InvalidMessageError, match="cannot fit"):
        store.put("Big", 0, b"x" * 5000)
    with pytest.raises(InvalidMessageError, match="cannot fit"):
        store.put_batch("Big", 0, [b"x" * 5000])
    assert store.put("Big", 0, b"x" * 3000).ok


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"properties": {"TAGS": "x"}}, "reserved"),
        ({"properties": {"UNIQ_KEY": "x"}}, "reserved"),
        ({"properties": {"a\x01": "x"}}, "separator"),
        ({"properties": {"a": "x\x02y"}}, "separator"),
        ({"properties": {"a": ""}}, "empty"),
        ({"tags": "a\x01"}, "separator"),
        ({"keys": ["a b"]}, "key separator"),
        ({"properties": {"p": "v" * 40000}}, "32767"),
    ],
)
def test_bad_properties_are_rejected(open_store, kwargs, match):
    store = open_store()
    with pytest.raises(InvalidPropertyError, match=match) as info:
        store.put("P", 0, b"x", **kwargs)
    if match == "32767":
        assert info.value.status == "PROPERTIES_SIZE_EXCEEDED"
    assert store.max_physical_offset == 0


def test_bad_queue_ids(open_store):
    store = open_store()
    for qid in (-1, 70000, "0", 1.5):
        with pytest.raises(InvalidMessageError, match="queue id"):
            store.put("Q", qid, b"x")  # type: ignore[arg-type]


def test_second_open_is_refused_with_a_clear_error(open_store, store_dir):
    store = open_store()
    store.put("L", 0, b"x")
    with pytest.raises(StoreLockedError, match=f"pid {os.getpid()}"):
        MessageStore.open(store_dir)
    assert store.put("L", 0, b"y").queue_offset == 1


def test_closed_store_raises(open_store):
    store = open_store()
    store.close()
    with pytest.raises(StoreClosedError):
        store.put("C", 0, b"x")
    with pytest.raises(StoreClosedError):
        store.get("C", 0, 0)
    store.close()  # idempotent


def test_reopen_after_clean_close_keeps_everything(open_store, store_dir):
    store = open_store()
    ids = [store.put("R", i % 2, b"m%d" % i, keys=f"k{i}").msg_id for i in range(300)]
    store.close()
    again = open_store()
    assert not again.recovery.abnormal and again.recovery.cut_bytes == 0
    assert again.get_max_offset_in_queue("R", 0) == 150
    assert again.view(ids[123]).body == b"m123"
    assert again.query_by_key("R", "k299")[0].body == b"m299"
    r = again.put("R", 0, b"next")
    assert r.queue_offset == 150
    assert r.physical_offset == again.view(r.msg_id).physical_offset


def test_sync_flush_flushes_every_put(open_store):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    r = store.put("S", 0, b"durable")
    assert r.status is PutStatus.PUT_OK
    assert store.flushed_offset >= r.physical_offset + 1
    b = store.put_batch("S", 0, [b"a", b"b"])
    assert store.flushed_offset == store.max_physical_offset
    assert b.ok


def test_stats(open_store):
    store = open_store()
    store.put("St", 0, b"x")
    stats = store.stats()
    assert stats["messages_put"] == 1
    assert stats["dispatch_behind_bytes"] > 0
    store.dispatch()
    assert store.stats()["dispatch_behind_bytes"] == 0
    assert store.stats()["consume_queues"] == 1


def test_unknown_config_key(store_dir):
    from shmq.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown store config key 'no_such_thing'"):
        MessageStore.open(store_dir, no_such_thing=1)
    with pytest.raises(ConfigError, match="flushDiskType"):
        MessageStore.open(store_dir, flush_disk_type="SOMETIMES")
    with pytest.raises(ConfigError, match="mappedFileSizeCommitLog"):
        MessageStore.open(store_dir, mapped_file_size_commit_log=1000)


def test_camel_case_overrides(open_store):
    store = open_store(mappedFileSizeCommitLog=8192, flushDiskType="SYNC_FLUSH")
    assert store.config.mapped_file_size_commit_log == 8192
    assert store.config.sync_flush


def test_bad_flag_and_born_timestamp(open_store):
    store = open_store()
    with pytest.raises(InvalidMessageError, match="flag"):
        store.put("F", 0, b"x", flag=2**40)
    with pytest.raises(InvalidMessageError, match="born timestamp"):
        store.put_batch("F", 0, [b"x"], born_timestamp=-1)
    assert store.put("F", 0, b"x", flag=-5).ok
    store.dispatch()
    assert store.get("F", 0, 0).messages[0].flag == -5


def test_sync_flush_store_dispatches_after_reopen(open_store, store_dir):
    store = open_store(flush_disk_type="SYNC_FLUSH")
    store.put("S", 0, b"a")
    store.close()
    again = open_store(flush_disk_type="SYNC_FLUSH")
    assert again.flushed_offset == again.max_physical_offset
    again.put("S", 0, b"b")
    again.dispatch()
    assert [m.body for m in again.get("S", 0, 0).messages] == [b"a", b"b"]


def test_wrong_size_store_file_is_a_clear_error_and_nothing_changes(open_store, store_dir):
    from shmq.errors import CorruptStoreError

    store = open_store()
    for _ in range(300):
        store.put("W", 0, b"x" * 400)
    store.close()
    first = os.path.join(store_dir, "commitlog", "00000000000000000000")
    with open(first, "r+b") as f:
        f.truncate(1000)
    sizes = {n: os.path.getsize(os.path.join(store_dir, "commitlog", n))
             for n in os.listdir(os.path.join(store_dir, "commitlog"))}  # fmt: skip
    with pytest.raises(CorruptStoreError, match="00000000000000000000 is 1000 bytes"):
        MessageStore.open(store_dir, mapped_file_size_commit_log=64 * 1024)
    after = {n: os.path.getsize(os.path.join(store_dir, "commitlog", n))
             for n in os.listdir(os.path.join(store_dir, "commitlog"))}  # fmt: skip
    assert after == sizes  # nothing was cut or deleted
    with pytest.raises(CorruptStoreError):  # the lock was released: the same error again
        MessageStore.open(store_dir, mapped_file_size_commit_log=64 * 1024)


def test_store_written_with_another_file_size_is_refused(open_store, store_dir):
    from shmq.errors import CorruptStoreError

    store = open_store()
    store.put("W", 0, b"x")
    store.close()
    with pytest.raises(CorruptStoreError, match="must be exactly 8192 bytes"):
        MessageStore.open(store_dir, mapped_file_size_commit_log=8192)


def test_threads_put_dispatch_and_read_concurrently(open_store):
    import threading

    store = open_store()
    writers, per_writer = 4, 400
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for i in range(per_writer):
                if i % 50 == 0:
                    store.put_batch("MT", w, [b"%d:%d" % (w, i + j) for j in range(10)])
                elif i % 50 >= 10:
                    store.put("MT", w, b"%d:%d" % (w, i), keys=f"w{w}-{i}" if i % 7 == 0 else ())
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def dispatch(stop: threading.Event) -> None:
        while not stop.is_set():
            store.dispatch()
            store.get("MT", 0, 0, 32)

    stop = threading.Event()
    reader = threading.Thread(target=dispatch, args=(stop,))
    reader.start()
    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    reader.join()
    assert not errors
    store.dispatch()
    for w in range(writers):
        bodies, offset = [], 0
        while True:
            got = store.get("MT", w, offset, 32)
            if not got.messages:
                break
            bodies += [m.body for m in got.messages]
            offset = got.next_begin_offset
        assert bodies == [b"%d:%d" % (w, i) for i in range(per_writer)]
    assert store.query_by_key("MT", "w2-14")[0].body == b"2:14"
