"""The POP state and its journal without a broker: replay gives back the state the records
left, a record cut by a crash and everything after it are dropped (never half applied),
compaction keeps what is open, and FIFO checkpoints move their queue's cursor as acks
come."""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.broker.pop import journal as jn
from shmq.broker.pop.checkpoints import PopCheckpoints


def ck(id_, offsets, *, pt=1000, it=500, rq=1, nxt=None, group="g", topic="t", q=0, **kw):
    return {"k": "ck", "id": id_, "c": group, "t": topic, "q": q, "so": offsets[0], "pt": pt,
            "it": it, "rq": rq, "o": offsets, "n": nxt if nxt is not None else offsets[-1] + 1,
            **kw}  # fmt: skip


def replayed(root) -> PopCheckpoints:
    state = PopCheckpoints()
    journal = jn.PopJournal(str(root), sync=False)
    journal.replay(state)
    journal.close()
    return state


def test_replay_restores_checkpoints_acks_and_cursors(tmp_path):
    journal = jn.PopJournal(str(tmp_path), sync=True)
    state = PopCheckpoints()
    journal.replay(state)
    records = [ck(1, [0, 1, 2]), ck(2, [3, 4], pt=1100), {"k": "ack", "id": 1, "o": [0, 2]},
               {"k": "ack", "id": 2, "o": [3, 4]}, {"k": "cur", "c": "g", "t": "t", "q": 1,
                                                    "o": 7}]  # fmt: skip
    journal.append(records)
    journal.close()
    for rec in records:
        state.apply(rec)
    again = replayed(tmp_path)
    assert list(again.checkpoints) == [1] and again.checkpoints[1].unacked == [1]
    assert again.cursors == {("g", "t", 0): 5, ("g", "t", 1): 7} == state.cursors
    assert again.find("g", "t", 0, 0, 1000) is again.checkpoints[1]
    assert again.find("g", "t", 0, 3, 1100) is None  # all acked: gone
    due, following = again.due(1499)
    assert due == [] and following == 1500
    assert [c.id for c in again.due(1500)[0]] == [1]


def test_a_record_cut_by_a_crash_and_what_follows_are_dropped(tmp_path):
    path = os.path.join(tmp_path, "pop", jn.FILE_NAME)
    os.makedirs(os.path.dirname(path))
    whole = json.dumps(ck(1, [0, 1])) + "\n"
    with open(path, "w") as f:
        f.write(whole + '{"k": "ack", "id": 1, "o": [0]' + "\n" + json.dumps(ck(2, [2])) + "\n")
    state = replayed(tmp_path)
    assert list(state.checkpoints) == [1] and state.checkpoints[1].unacked == [0, 1]
    with open(path, "a") as f:
        f.write(json.dumps({"k": "ack", "id": 1, "o": [0]}))  # no newline: a cut write
    state = replayed(tmp_path)
    assert state.checkpoints[1].unacked == [0, 1]
    # the rewrite at replay dropped the cut bytes: a new record appends cleanly after it
    journal = jn.PopJournal(str(tmp_path), sync=False)
    journal.replay(PopCheckpoints())
    journal.append([{"k": "ack", "id": 1, "o": [1]}])
    journal.close()
    assert replayed(tmp_path).checkpoints[1].unacked == [0]


def test_compaction_keeps_what_is_open(tmp_path, monkeypatch):
    monkeypatch.setattr(jn, "COMPACT_BYTES", 2000)
    journal = jn.PopJournal(str(tmp_path), sync=False)
    state = PopCheckpoints()
    journal.replay(state)
    for i in range(100):
        recs = [ck(i + 1, [2 * i, 2 * i + 1], pt=1000 + i), {"k": "ack", "id": i + 1,
                                                            "o": [2 * i]}]  # fmt: skip
        if i % 10:
            recs.append({"k": "ack", "id": i + 1, "o": [2 * i + 1]})
        journal.append(recs)
        for rec in recs:
            state.apply(rec)
        if journal.wants_compaction():
            journal.rewrite(state.snapshot())
    journal.close()
    assert os.path.getsize(journal.path) < 3000
    again = replayed(tmp_path)
    assert sorted(again.checkpoints) == list(range(1, 101, 10))
    assert again.cursors == state.cursors == {("g", "t", 0): 200}
    assert all(c.unacked == [c.offsets[1]] for c in again.checkpoints.values())


def test_fifo_checkpoint_holds_its_queue_until_acked():
    state = PopCheckpoints()
    state.apply(ck(1, [0, 1, 2], rq=999, nxt=3, cn=[[0, 0], [1, 2], [2, 0]]))
    key = ("g", "t", 0)
    assert state.cursors[key] == 0 and state.order_checkpoint(key).counts[1] == 2
    state.apply({"k": "ack", "id": 1, "o": [0]})
    assert state.cursors[key] == 1
    state.apply({"k": "vis", "id": 1, "o": 2, "at": 9000})
    assert state.order_checkpoint(key).blocked_until() == 9000
    state.apply({"k": "ack", "id": 1, "o": [1, 2]})
    assert state.cursors[key] == 3 and state.order_checkpoint(key) is None
    assert state.due(10**12)[0] == []  # FIFO checkpoints are never revived


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["k", "id", "o", "c", "t", "q", "so", "pt",
                                                  "it", "rq", "n", "at"]),
                                st.one_of(st.integers(-3, 10), st.text(max_size=3),
                                          st.sampled_from(["ck", "ack", "vis", "done", "cur"]),
                                          st.lists(st.integers(0, 5), max_size=3))),
                max_size=8))  # fmt: skip
def test_hostile_journal_lines_never_crash_a_replay(tmp_path_factory, records):
    root = tmp_path_factory.mktemp("j")
    os.makedirs(os.path.join(root, "pop"))
    with open(os.path.join(root, "pop", jn.FILE_NAME), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    replayed(root)  # whatever is unreadable ends the replay; nothing raises
