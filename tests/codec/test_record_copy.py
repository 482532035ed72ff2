"""``copy_owned_records`` (a TCP pull's copy) and ``gather_owned_bodies`` (``pull_bulk``'s)
against the rule every other reader follows (``parse_at`` then ``units_match``): over valid
records, damaged bytes anywhere and units that do not own their record, they copy exactly
the records that rule accepts, as stored, or exactly their bodies, queue offsets and store
timestamps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_record import encode, fields_for

from shmq.codec import record as rec
from shmq.codec.record_copy import copy_owned_records, gather_owned_bodies, owned_room

TOPIC = np.frombuffer(b"Pulled", dtype=np.uint8)
BASE = 1 << 30  # the file's first physical offset


def as_v6(record: bytes) -> bytes:
    """``record`` with IPv6 born and store hosts (16-byte addresses; the encoder writes
    IPv4 ones): the sysflag bits set, 12 bytes more in each host, the total size fixed."""
    sysflag = int.from_bytes(record[36:40], "big") | rec.SYSFLAG_BORNHOST_V6
    sysflag |= rec.SYSFLAG_STOREHOST_V6
    out = (record[4:36] + sysflag.to_bytes(4, "big") + record[40:48] + bytes(12)
           + record[48:64] + bytes(12) + record[64:])  # fmt: skip
    return (len(out) + 4).to_bytes(4, "big") + out


def stored(n: int, v6: bool, gap: int):
    """``n`` records of ``TOPIC`` queue 3 (queue offsets 10..), IPv6 hosts or not, each
    followed by ``gap`` bytes of another queue's record (copied in runs or not)."""
    data, positions, sizes = b"", [], []
    for i in range(n):
        props = b"TAGS\x01t%d\x02" % i if i % 2 else b""
        fields = fields_for(1, queue_id=3, queue_offset=10 + i)
        one, end = encode(b"Pulled", [bytes([i]) * (5 + 13 * i)], [props], fields,
                          base=BASE + len(data))  # fmt: skip
        record = as_v6(one[:end].tobytes()) if v6 else one[:end].tobytes()
        positions.append(len(data))
        sizes.append(len(record))
        data += record + b"\xab" * gap
    return (np.frombuffer(data, dtype=np.uint8).copy(), np.array(positions, dtype=np.int64),
            np.array(sizes, dtype=np.int64))  # fmt: skip


def owned_rows(buf, positions, sizes, qoffs, queue_id) -> list[np.ndarray]:
    """The rows of the records ``parse_at`` decodes and ``units_match`` gives the units."""
    out = []
    for p, size, qoff in zip(positions, sizes, qoffs, strict=True):
        rows = np.zeros(1, dtype=rec.RECORD_ROW)
        if not 0 <= p < buf.shape[0]:
            continue
        if rec.parse_at(buf, np.array([p]), buf.shape[0], BASE, False, rows) != 1:
            continue
        ok = np.zeros(1, dtype=np.bool_)
        rec.units_match(buf, rows, np.array([size]), np.array([qoff]), TOPIC, queue_id, ok)
        if ok[0]:
            out.append(rows[0])
    return out


def by_the_rule(buf, positions, sizes, qoffs, queue_id) -> bytes:
    """The records the rule gives the units, back to back."""
    rows = owned_rows(buf, positions, sizes, qoffs, queue_id)
    return b"".join(buf[r["pos"] : r["pos"] + r["size"]].tobytes() for r in rows)


def bodies_by_the_rule(buf, positions, sizes, qoffs, queue_id):
    """The bodies, queue offsets, store timestamps and sysFlags of the records the rule
    gives."""
    rows = owned_rows(buf, positions, sizes, qoffs, queue_id)
    bodies = [buf[r["body_start"] : r["body_start"] + r["body_len"]].tobytes() for r in rows]
    return (bodies, [r["queue_offset"] for r in rows], [r["store_ts"] for r in rows],
            [r["sysflag"] for r in rows])  # fmt: skip


def copied(buf, positions, sizes, qoffs, queue_id) -> tuple[bytes, int]:
    out = np.zeros(int(np.maximum(sizes, 0).sum()) + 1, dtype=np.uint8)
    end, n = copy_owned_records(buf, positions, sizes, qoffs, TOPIC, queue_id, BASE, out, 0)
    return out[:end].tobytes(), n


def gathered(buf, positions, sizes, qoffs, queue_id):
    """What ``gather_owned_bodies`` copies, after a first unit's worth already gathered
    (``k`` = 1), as ``bodies_by_the_rule`` answers."""
    n = positions.shape[0] + 1
    out = np.zeros(int(np.maximum(sizes, 0).sum()) + 3, dtype=np.uint8)
    out_offs = np.zeros(n + 1, dtype=np.int64)
    out_offs[1] = 3  # a body of 3 bytes before
    got_qoffs, stamps = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    sysflags = np.full(n, -1, np.int32)
    k = gather_owned_bodies(buf, positions, sizes, qoffs, TOPIC, queue_id, BASE, out,
                            out_offs, 1, got_qoffs, stamps, sysflags)  # fmt: skip
    bodies = [out[out_offs[i] : out_offs[i + 1]].tobytes() for i in range(1, k)]
    assert (got_qoffs[0], stamps[0], sysflags[0]) == (-1, -1, -1)
    return bodies, got_qoffs[1:k].tolist(), stamps[1:k].tolist(), sysflags[1:k].tolist()


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 6),
    v6=st.booleans(),
    gap=st.sampled_from([0, 0, 7]),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    unit_changes=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(["size", "qoff", "pos"]), st.integers(-9, 9)),
        max_size=3,
    ),
    queue_id=st.sampled_from([3, 3, 3, 4]),
)
def test_copies_exactly_what_the_units_own(n, v6, gap, flips, unit_changes, queue_id):
    # a readonly buffer, as the CommitLog's mapping is on the pull path
    buf, positions, sizes = stored(n, v6, gap)
    buf = buf.copy()
    qoffs = np.arange(10, 10 + n, dtype=np.int64)
    for where, bit in flips:
        buf[where % buf.shape[0]] ^= bit
    for i, what, delta in unit_changes:
        i %= n
        {"size": sizes, "qoff": qoffs, "pos": positions}[what][i] += delta
    buf.flags.writeable = False
    got, count = copied(buf, positions, sizes, qoffs, queue_id)
    assert got == by_the_rule(buf, positions, sizes, qoffs, queue_id)
    assert gathered(buf, positions, sizes, qoffs, queue_id) == bodies_by_the_rule(
        buf, positions, sizes, qoffs, queue_id
    )
    if not flips and not unit_changes and queue_id == 3:
        assert count == n and got == b"".join(
            buf[p : p + s].tobytes() for p, s in zip(positions, sizes, strict=True)
        )


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=400),
    units=st.lists(
        st.tuples(st.integers(-5, 400), st.integers(-5, 400), st.integers(0, 3)), max_size=8
    ),
)
def test_garbage_never_reads_out_of_bounds(data, units):
    buf = np.frombuffer(data, dtype=np.uint8)
    positions = np.array([u[0] for u in units], dtype=np.int64)
    sizes = np.array([u[1] for u in units], dtype=np.int64)
    qoffs = np.array([u[2] for u in units], dtype=np.int64)
    got, count = copied(buf, positions, sizes, qoffs, 0)
    assert got == by_the_rule(buf, positions, sizes, qoffs, 0) and count <= len(units)
    assert gathered(buf, positions, sizes, qoffs, 0) == bodies_by_the_rule(
        buf, positions, sizes, qoffs, 0
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(1 << 40), 1 << 40), max_size=20), st.integers(0, 1 << 31))
def test_owned_room_is_the_sum_of_sizes_clipped_to_a_file(sizes, limit):
    """The room a pull sizes its buffer by: damaged (negative or huge) unit sizes count as
    at most a file's bytes and never less than none."""
    arr = np.array(sizes, dtype=np.int64)
    assert owned_room(arr, limit) == int(np.clip(arr, 0, limit).sum())
