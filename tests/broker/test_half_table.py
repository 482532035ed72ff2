"""The open-transaction table's rules on their own: outcomes are taken once, and a restart
from the persisted offsets (replaying op records and half messages from them, as the
broker does) finds exactly the transactions that were open, whatever happened before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.broker.transaction.half_table import HalfTable, OpenHalf
from shmq.broker.transaction.records import HalfRecord


def half(queue_offset: int, identity: int | None = None, checks: int = 0) -> HalfRecord:
    identity = queue_offset if identity is None else identity
    return HalfRecord(1000 + queue_offset, queue_offset, identity, "G", "T", 0, checks, 0, 0,
                      f"id{identity}", None, None)  # type: ignore[arg-type]  # fmt: skip


class Store:
    """The half queue and the op queue as the broker appends to them."""

    def __init__(self) -> None:
        self.halves: list[HalfRecord] = []
        self.ops: list[int] = []  # identity per op queue offset

    def add_half(self, identity: int | None = None, checks: int = 0) -> HalfRecord:
        record = half(len(self.halves), identity, checks)
        self.halves.append(record)
        return record

    def add_op(self, identity: int) -> int:
        self.ops.append(identity)
        return len(self.ops) - 1

    def scan(self, table: HalfTable) -> None:
        for record in self.halves[table.scanned :]:
            if not table.skips(record.queue_offset):
                table.seen_half(record)
        table.scanned_to(len(self.halves))

    def restart(self, table: HalfTable) -> HalfTable:
        """What a restart rebuilds from the offsets ``table`` persisted last."""
        fresh = HalfTable(table.half_offset, table.op_offset)
        for k, identity in enumerate(self.ops[table.op_offset :], table.op_offset):
            fresh.seen_op(identity, k)
        fresh.ops_end = max(fresh.ops_end, len(self.ops))
        self.scan(fresh)
        return fresh


def test_an_outcome_is_taken_once_also_for_a_fresh_half_and_a_copy():
    store, table = Store(), HalfTable()
    first = store.add_half()  # not scanned yet: a fresh half
    assert table.refusal(first) is None
    table.finished(first.identity, store.add_op(first.identity))
    assert "already finished" in table.refusal(first)
    second = store.add_half()
    store.scan(table)
    copy = store.add_half(second.identity, checks=1)
    table.checked(OpenHalf.of(copy))
    assert table.refusal(copy) is None and table.refusal(second) is None  # either names it
    table.finished(second.identity, store.add_op(second.identity))
    assert table.refusal(copy) and table.refusal(second)
    store.scan(table)
    assert table.open == {}
    assert table.advance() == (3, 2)
    assert "finished" in table.refusal(second)  # forgotten below the offsets: still closed
    assert table.done == {} and table.copies == {}


def test_op_records_of_transactions_above_an_open_one_are_read_again_after_a_restart():
    store, table = Store(), HalfTable()
    for _ in range(3):
        store.add_half()
    store.scan(table)
    for identity in (2, 1):
        table.finished(identity, store.add_op(identity))
    assert table.advance() == (0, 0)  # 0 is open: the op records of 1 and 2 still count
    assert set(store.restart(table).open) == {0}


def test_a_transaction_whose_op_record_is_not_written_is_found_open_after_a_restart():
    store, table = Store(), HalfTable()
    store.add_half()
    store.add_half()
    store.scan(table)
    table.finished(0, -1)  # committed, its op record refused for now
    table.finished(1, store.add_op(1))
    assert table.unwritten_ops() == [0]
    assert table.advance() == (0, 0)
    assert set(store.restart(table).open) == {0}  # its commit is searched for, or checked
    table.op_written(0, store.add_op(0))
    assert table.advance() == (2, 2)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            ["half"] * 3 + ["end"] * 3 + ["check"] * 2 + ["scan", "persist", "restart"]
        ),
        st.integers(0, 7),
    ),
    max_size=60,
)


@settings(max_examples=500, deadline=None)
@given(events=EVENTS)
def test_a_restart_from_the_persisted_offsets_finds_what_was_open(events):
    store, table = Store(), HalfTable()
    closed: set[int] = set()
    for kind, pick in events:
        if kind == "half":
            store.add_half()
        elif kind == "check" and table.open:
            h = sorted(table.open.values(), key=lambda h: h.identity)[pick % len(table.open)]
            table.checked(OpenHalf.of(store.add_half(h.identity, h.check_times + 1)))
        elif kind == "end" and store.halves:
            record = store.halves[pick % len(store.halves)]
            if table.refusal(record) is None:
                assert record.identity not in closed
                table.finished(record.identity, store.add_op(record.identity))
                closed.add(record.identity)
            else:
                assert record.identity in closed  # refused only when it was finished
        elif kind == "scan":
            store.scan(table)
        elif kind == "persist":
            store.scan(table)
            table.advance()
        elif kind == "restart":  # after a persist: what the broker finds at its start
            store.scan(table)
            table.advance()
            table = store.restart(table)
            assert set(table.open) == {r.identity for r in store.halves} - closed
    store.scan(table)
    everyone = {r.identity for r in store.halves}
    assert set(table.open) == everyone - closed
    newest = {r.identity: r.queue_offset for r in store.halves}
    assert {i: h.queue_offset for i, h in table.open.items()} == {i: newest[i] for i in table.open}
