"""Reput's fast path (``dispatch_run``) must write exactly what the general dispatch writes:
same consume-queue units, same index files, whatever mix of queues, transaction types,
gaps and file boundaries the passes hold."""

from __future__ import annotations

import contextlib
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from e2e_helpers import small_tmpfs
from shmq.codec import record as rec
from shmq.codec.record_pack import tail as record_tail
from shmq.errors import DiskFullError
from shmq.store.commitlog import SCAN_ROWS, CommitLog
from shmq.store.dispatch.dispatcher import Dispatcher
from shmq.store.index.service import IndexService

TOPICS = (b"RunA", b"RunB")
TX_TYPES = (
    0,
    rec.SYSFLAG_TRANSACTION_PREPARED,
    rec.SYSFLAG_TRANSACTION_COMMIT,
    rec.SYSFLAG_TRANSACTION_ROLLBACK,
)
CQ_FILE_SIZE = 20 * 8  # eight units a file: runs cross consume-queue files
COMMITLOG_FILE_SIZE = 4096  # records roll into new files behind blank records


def _props(i: int, keyed: bool) -> bytes:
    props = b"UNIQ_KEY\x01" + b"%032X" % i + b"\x02"
    return props + (b"KEYS\x01k%d k\x02" % (i % 5) if keyed else b"")


def _append(commitlog: CommitLog, counters: dict, i: int, record: tuple) -> None:
    """One record as a writer stores it, ``gap`` skipping a queue offset (a queue whose
    consume queue is behind, as after a crash). Prepared and rolled-back transaction
    records take no place in the queue; they carry its next offset (RocketMQ stores 0),
    so that only their type keeps them out."""
    topic, qid, keyed, tx, gap = record
    key = (topic, qid)
    offset = counters.get(key, 0) + (1 if gap else 0)
    if tx in (0, rec.SYSFLAG_TRANSACTION_COMMIT):
        counters[key] = offset + 1
    ts = 1_700_000_000_000 + i
    phys = commitlog.append_one(
        b"body-%d" % i, record_tail(TOPICS[topic], _props(i, keyed)), 0, qid, 0, offset, ts, ts
    )
    if tx:
        mf = commitlog.queue.find_file(phys)
        at = phys - mf.file_from_offset + 36  # SYSFLAG
        mf.buf[at : at + 4] = np.frombuffer(tx.to_bytes(4, "big"), np.uint8)


def _dispatcher(root: str) -> Dispatcher:
    index = IndexService(os.path.join(root, "index"), 16, 12)
    return Dispatcher(os.path.join(root, "cq"), CQ_FILE_SIZE, index)


def _queue_bytes(d: Dispatcher) -> dict:
    return {
        key: (cq.max_offset, b"".join(bytes(mf.buf[: mf.wrote_position]) for mf in cq.queue.files))
        for key, cq in d.consume_queues.items()
    }


records_st = st.lists(
    st.tuples(
        st.integers(0, 1),  # topic
        st.integers(0, 1),  # queue id
        st.booleans(),  # KEYS besides the unique key
        st.sampled_from(TX_TYPES),
        st.integers(0, 30).map(lambda v: v == 0),  # a gap in queue offsets, now and then
        st.sampled_from(("", "", "pass", "redo")),  # then: a reput pass, or one that redoes
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=records_st,
    runs=st.integers(0, 3).map(lambda v: v > 0),
    table=st.sampled_from((SCAN_ROWS, 3)),
)
def test_dispatch_run_writes_what_dispatch_batch_writes(tmp_path_factory, records, runs, table):
    """A pass follows each record marked so and the last one; a ``redo`` pass starts over
    where the pass before began (reput after a crash re-dispatches from its checkpoint).
    A table of 3 rows makes passes longer than it (a ``send_bulk`` call's)."""
    root = str(tmp_path_factory.mktemp("run"))
    if runs:  # mostly one queue: the fast path's case
        records = [(0, 0, *rest) for _, _, *rest in records] + records[-3:]
    commitlog = CommitLog(os.path.join(root, "commitlog"), COMMITLOG_FILE_SIZE)
    fast, general = _dispatcher(os.path.join(root, "fast")), _dispatcher(os.path.join(root, "gen"))
    rows = np.empty(table, dtype=rec.RECORD_ROW)
    counters: dict = {}
    done = fast_done = began = 0
    try:
        for i, (*record, then) in enumerate(records):
            _append(commitlog, counters, i, tuple(record))
            if then or i + 1 == len(records):
                end = commitlog.max_offset
                if then == "redo":
                    done = fast_done = began
                began = done
                _, _, _, fast_done, code = fast.dispatch_range(commitlog, fast_done, end, rows)
                assert fast_done == end and code in (rec.PARSE_END, rec.PARSE_FULL)
                for batch in commitlog.scan(done, end):
                    general.dispatch_batch(batch)
                done = commitlog.last_scan[0]
        assert fast_done == done
        assert _queue_bytes(fast) == _queue_bytes(general)
        assert [f.buf.tobytes() for f in fast.index.files] == [
            f.buf.tobytes() for f in general.index.files
        ]
    finally:
        for d in (fast, general):
            d.close()
            d.index.close()
        commitlog.close()


def test_a_pass_that_continues_the_queue_takes_one_kernel_call(tmp_path):
    """After a general pass names the queue, the next pass of that queue is a run; a pass
    with a record of another queue is not, and is dispatched the general way."""
    commitlog = CommitLog(str(tmp_path / "commitlog"), 1 << 16)
    d = _dispatcher(str(tmp_path))
    rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)
    counters: dict = {}
    try:
        _append(commitlog, counters, 0, (0, 0, True, 0, False))
        assert d.dispatch_run(commitlog, 0, commitlog.max_offset, rows) is None  # none named
        total, touched, _, done, _ = d.dispatch_range(commitlog, 0, commitlog.max_offset, rows)
        assert total == 1 and list(touched) == [("RunA", 0)]
        for i in (1, 2):
            _append(commitlog, counters, i, (0, 0, True, 0, False))
        n, done, code, cq = d.dispatch_run(commitlog, done, commitlog.max_offset, rows)
        assert (n, code, cq.max_offset) == (2, rec.PARSE_END, 3)
        _append(commitlog, counters, 3, (0, 1, False, 0, False))
        assert d.dispatch_run(commitlog, done, commitlog.max_offset, rows) is None
        assert ("RunA", 1) not in d.consume_queues  # nothing written by the refusal
        total, touched, _, _, _ = d.dispatch_range(commitlog, done, commitlog.max_offset, rows)
        assert total == 1 and list(touched) == [("RunA", 1)]
        assert len(d.index.query("RunA", "k1", 10, 0, 2**62)) == 1
    finally:
        d.close()
        d.index.close()
        commitlog.close()


def test_a_full_disk_stops_a_run_and_the_redone_pass_writes_it_whole(tmp_path):
    """Reput's consume queues on a full disk (a real tmpfs): a run that needs a new
    consume-queue file raises ``DiskFullError`` before it writes a unit (without the
    reservation it would write into a page with no block: SIGBUS); once there is room
    again, redoing the pass leaves what the general path writes."""
    commitlog = CommitLog(str(tmp_path / "commitlog"), 1 << 16)
    reference = _dispatcher(str(tmp_path / "gen"))
    rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)
    counters: dict = {}
    with small_tmpfs(tmp_path, "1m") as mnt:
        d = _dispatcher(mnt)
        try:
            for i in range(8):  # the first consume-queue file, whole
                _append(commitlog, counters, i, (0, 0, True, 0, False))
            d.dispatch_range(commitlog, 0, commitlog.max_offset, rows)  # names the run
            began = commitlog.max_offset
            for i in range(8, 12):  # a run that needs the next file
                _append(commitlog, counters, i, (0, 0, True, 0, False))
            filler = os.path.join(mnt, "filler")
            with open(filler, "wb") as f, contextlib.suppress(OSError):
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            with pytest.raises(DiskFullError):
                d.dispatch_range(commitlog, began, commitlog.max_offset, rows)
            os.unlink(filler)
            *_, done, _ = d.dispatch_range(commitlog, began, commitlog.max_offset, rows)
            assert done == commitlog.max_offset
            for batch in commitlog.scan(0, commitlog.max_offset):
                reference.dispatch_batch(batch)
            assert _queue_bytes(d) == _queue_bytes(reference)
            assert d.consume_queue("RunA", 0).max_offset == 12
        finally:
            d.close()
            d.index.close()
    reference.close()
    reference.index.close()
    commitlog.close()


def test_runs_need_no_index_file_and_a_keyed_record_in_one_makes_it(tmp_path):
    """Records without keys (``send_bulk``'s: no unique key) never create an index file,
    and the fast path once waited for one: every pass went the general way. A run now goes
    without it, and the first record with keys in a run creates it and is indexed."""
    commitlog = CommitLog(str(tmp_path / "commitlog"), 1 << 16)
    d = _dispatcher(str(tmp_path))
    rows = np.empty(SCAN_ROWS, dtype=rec.RECORD_ROW)

    def append(i: int, props: bytes) -> int:
        return commitlog.append_one(b"body-%d" % i, record_tail(b"RunA", props), 0, 0, 0, i, i, i)

    try:
        append(0, b"")
        _, _, _, done, _ = d.dispatch_range(commitlog, 0, commitlog.max_offset, rows)
        for i in (1, 2):
            append(i, b"")
        n, done, _, cq = d.dispatch_run(commitlog, done, commitlog.max_offset, rows)
        assert (n, cq.max_offset, d.index.files) == (2, 3, [])
        append(3, b"")
        keyed = append(4, b"KEYS\x01first\x02")
        n, done, _, cq = d.dispatch_run(commitlog, done, commitlog.max_offset, rows)
        assert (n, cq.max_offset, len(d.index.files)) == (2, 5, 1)
        assert d.index.query("RunA", "first", 10, 0, 2**62) == [keyed]
    finally:
        d.close()
        d.index.close()
        commitlog.close()


def test_a_run_longer_than_the_row_table_takes_the_fast_path_to_its_end(tmp_path, monkeypatch):
    """A pass of one queue longer than the caller's row table (a ``send_bulk`` call of
    16,384 records against 4,096 rows) is one ``dispatch_run`` per table, across
    consume-queue files; once the first table's run went the fast way and the rest the
    general way (three quarters of a bulk stream's records)."""
    commitlog = CommitLog(str(tmp_path / "commitlog"), 1 << 16)
    d = _dispatcher(str(tmp_path))
    rows = np.empty(4, dtype=rec.RECORD_ROW)
    counters: dict = {}
    try:
        _append(commitlog, counters, 0, (0, 0, False, 0, False))
        _, _, _, done, _ = d.dispatch_range(commitlog, 0, commitlog.max_offset, rows)
        for i in range(1, 22):
            _append(commitlog, counters, i, (0, 0, i % 3 == 0, 0, False))
        general = []
        monkeypatch.setattr(d, "dispatch_batch", lambda batch: general.append(batch))
        total, touched, last_ts, done, code = d.dispatch_range(
            commitlog, done, commitlog.max_offset, rows
        )
        assert (total, done, code, general) == (21, commitlog.max_offset, rec.PARSE_END, [])
        assert last_ts == 1_700_000_000_021 and list(touched) == [("RunA", 0)]
        assert d.consume_queue("RunA", 0).max_offset == 22  # eight units a file: three files
        assert len(d.index.query("RunA", "k1", 10, 0, 2**62)) == 2  # records 6 and 21
    finally:
        d.close()
        d.index.close()
        commitlog.close()
