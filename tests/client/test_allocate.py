"""Queue allocation strategies: RocketMQ's worked examples, an independent consistent-hash
computation, and properties (a partition of the queues, stable under reordering)."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.client.consumer.allocate import (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateConsistentHash,
    AllocateMachineRoomNearby,
    AllocateMessageQueueStrategy,
    allocation_strategy,
    md5_hash,
)
from shmq.client.types import MessageQueue
from shmq.errors import ClientError, ConfigError

CIDS3 = ["c0", "c1", "c2"]


def queues(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def shares(strategy, mq_all, cid_all) -> dict[str, list[MessageQueue]]:
    return {cid: strategy.allocate("g", cid, mq_all, cid_all) for cid in cid_all}


def ids(share) -> list[int]:
    return [mq.queue_id for mq in share]


def named(share) -> list[str]:
    return [f"{mq.broker_name}:{mq.queue_id}" for mq in share]


def assert_partition(by_cid: dict[str, list[MessageQueue]], mq_all) -> None:
    counts = Counter(mq for share in by_cid.values() for mq in share)
    assert set(counts) == set(mq_all)
    assert all(n == 1 for n in counts.values()), counts


# --- worked examples -------------------------------------------------------------------------


def test_avg_8_queues_3_consumers():
    got = shares(AllocateAveragely(), queues(8), CIDS3)
    assert [ids(got[c]) for c in CIDS3] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_avg_by_circle_8_queues_3_consumers():
    got = shares(AllocateAveragelyByCircle(), queues(8), CIDS3)
    assert [ids(got[c]) for c in CIDS3] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_avg_more_consumers_than_queues():
    got = shares(AllocateAveragely(), queues(2), CIDS3)
    assert [ids(got[c]) for c in CIDS3] == [[0], [1], []]


def test_avg_by_circle_more_consumers_than_queues():
    got = shares(AllocateAveragelyByCircle(), queues(2), ["c0", "c1", "c2", "c3"])
    assert [ids(got[c]) for c in ["c0", "c1", "c2", "c3"]] == [[0], [1], [], []]


TWO_BROKERS = queues(5, broker="a") + queues(5, broker="b")
CIDS4 = ["c0", "c1", "c2", "c3"]


def test_avg_two_brokers_4_consumers():
    got = shares(AllocateAveragely(), TWO_BROKERS, CIDS4)
    assert [named(got[c]) for c in CIDS4] == [
        ["a:0", "a:1", "a:2"],
        ["a:3", "a:4", "b:0"],
        ["b:1", "b:2"],
        ["b:3", "b:4"],
    ]


def test_avg_by_circle_two_brokers_4_consumers():
    got = shares(AllocateAveragelyByCircle(), TWO_BROKERS, CIDS4)
    assert [named(got[c]) for c in CIDS4] == [
        ["a:0", "a:4", "b:3"],
        ["a:1", "b:0", "b:4"],
        ["a:2", "b:1"],
        ["a:3", "b:2"],
    ]


def test_inputs_in_any_order_with_duplicates():
    mq_all = list(reversed(queues(8))) + queues(2)
    cid_all = ["c2", "c0", "c1", "c0"]
    got = shares(AllocateAveragely(), mq_all, cid_all)
    assert [ids(got[c]) for c in CIDS3] == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_consumer_not_in_cid_all_gets_nothing():
    for strategy in (AllocateAveragely(), AllocateAveragelyByCircle(), AllocateConsistentHash()):
        assert strategy.allocate("g", "stranger", queues(8), CIDS3) == []
        assert strategy.allocate("g", "c0", queues(8), []) == []


def test_no_queues_gives_nothing():
    for strategy in (
        AllocateAveragely(),
        AllocateAveragelyByCircle(),
        AllocateConsistentHash(),
        AllocateByMachineRoom({"hz"}),
        AllocateMachineRoomNearby(),
    ):
        assert strategy.allocate("g", "c0", [], CIDS3) == []


def test_bad_allocate_arguments():
    strategy = AllocateAveragely()
    with pytest.raises(ClientError, match=r"current_cid.*''"):
        strategy.allocate("g", "", queues(2), CIDS3)
    with pytest.raises(ClientError, match=r"current_cid.*None"):
        strategy.allocate("g", None, queues(2), CIDS3)
    with pytest.raises(ClientError, match=r"consumer_group.*42"):
        strategy.allocate(42, "c0", queues(2), CIDS3)
    with pytest.raises(ClientError, match="'q0'"):
        strategy.allocate("g", "c0", ["q0"], CIDS3)
    with pytest.raises(ClientError, match=r"mq_all.*None"):
        strategy.allocate("g", "c0", None, CIDS3)
    with pytest.raises(ClientError, match=r"cid_all.*'c0'"):
        strategy.allocate("g", "c0", queues(2), "c0")
    with pytest.raises(ClientError, match="cid_all holds ''"):
        strategy.allocate("g", "c0", queues(2), ["c0", ""])
    with pytest.raises(ClientError, match="cid_all holds 7"):
        strategy.allocate("g", "c0", queues(2), ["c0", 7])
    with pytest.raises(ClientError, match="current_cid"):
        AllocateByConfig(queues(1)).allocate("g", "", [], [])


# --- CONSISTENT_HASH -------------------------------------------------------------------------


def reference_hash(key: str) -> int:
    return int.from_bytes(hashlib.md5(key.encode("utf-8")).digest()[:4], "big")


def reference_owner(mq: MessageQueue, cid_all, virtual_nodes: int = 10) -> str:
    """The owner of ``mq``, by a linear scan of the ring (later client ids win collisions)."""
    ring: dict[int, str] = {}
    for cid in sorted(set(cid_all)):
        for i in range(virtual_nodes):
            ring[reference_hash(cid + "-" + str(i))] = cid
    h = reference_hash(str(mq))
    best = None
    for node in ring:
        if node >= h and (best is None or node < best):
            best = node
    if best is None:
        best = min(ring)
    return ring[best]


def test_md5_hash_is_first_four_bytes_big_endian():
    digest = hashlib.md5(b"c0-0").digest()
    assert md5_hash("c0-0") == (digest[0] << 24) | (digest[1] << 16) | (digest[2] << 8) | digest[3]
    assert 0 <= md5_hash("MessageQueue [topic=T, brokerName=broker-a, queueId=0]") < 2**32


def test_consistent_hash_reference_example():
    got = shares(AllocateConsistentHash(), queues(8), CIDS3)
    assert [ids(got[c]) for c in CIDS3] == [[0, 1, 5, 6], [3, 4], [2, 7]]


@pytest.mark.parametrize(
    ("mq_all", "cid_all", "virtual_nodes"),
    [
        (queues(8), CIDS3, 10),
        (queues(16, "Orders") + queues(16, "Orders", "broker-b"), ["10.0.0.1@1", "10.0.0.2@7"], 10),
        (queues(12, "Ticks", "hz@x"), ["a", "b", "c", "d", "e"], 3),
        (queues(5), ["only"], 1),
    ],
)
def test_consistent_hash_matches_linear_scan(mq_all, cid_all, virtual_nodes):
    strategy = AllocateConsistentHash(virtual_nodes)
    for cid in cid_all:
        expected = [mq for mq in mq_all if reference_owner(mq, cid_all, virtual_nodes) == cid]
        assert strategy.allocate("g", cid, mq_all, cid_all) == sorted(expected)


def test_consistent_hash_collision_later_cid_wins():
    # every node key is 4 characters long, so all nodes collide; c1 is added last and wins
    strategy = AllocateConsistentHash(hash_function=len)
    assert strategy.allocate("g", "c1", queues(3), ["c1", "c0"]) == queues(3)
    assert strategy.allocate("g", "c0", queues(3), ["c1", "c0"]) == []


def test_consistent_hash_node_at_the_queue_hash_owns_it():
    mq_a, mq_b, mq_wrap = queues(3)
    points = {"a-0": 10, "b-0": 20, str(mq_a): 10, str(mq_b): 11, str(mq_wrap): 21}
    strategy = AllocateConsistentHash(virtual_nodes=1, hash_function=points.__getitem__)
    assert strategy.allocate("g", "a", queues(3), ["a", "b"]) == [mq_a, mq_wrap]
    assert strategy.allocate("g", "b", queues(3), ["a", "b"]) == [mq_b]


def test_consistent_hash_adding_consumer_moves_queues_only_to_it():
    mq_all = queues(32) + queues(32, broker="broker-b")
    strategy = AllocateConsistentHash()
    before = {mq: c for c, share in shares(strategy, mq_all, CIDS3).items() for mq in share}
    after = {mq: c for c, share in shares(strategy, mq_all, [*CIDS3, "c3"]).items() for mq in share}
    moved = {mq for mq in mq_all if before[mq] != after[mq]}
    assert moved and all(after[mq] == "c3" for mq in moved)


# --- CONFIG ----------------------------------------------------------------------------------


def test_config_returns_exactly_the_configured_list():
    configured = [MessageQueue("T", "b", 3), MessageQueue("T", "a", 1), MessageQueue("X", "a", 0)]
    strategy = AllocateByConfig(configured)
    assert strategy.allocate("g", "c0", queues(8), CIDS3) == configured
    assert strategy.allocate("g", "stranger", [], ["c0"]) == configured
    got = strategy.allocate("g", "c0", [], [])
    got.append(MessageQueue("T", "z", 9))  # a copy: the configuration is not changed
    assert strategy.allocate("g", "c0", [], []) == configured
    assert AllocateByConfig([]).allocate("g", "c0", queues(2), ["c0"]) == []


# --- MACHINE_ROOM ----------------------------------------------------------------------------

ROOM_QUEUES = queues(4, broker="hz@a") + queues(4, broker="sh@b") + queues(2, broker="broker-c")


def test_machine_room_reference_example_with_remainder():
    # 8 queues in the configured rooms, 3 consumers: mod 2, rem 2
    got = shares(AllocateByMachineRoom({"hz", "sh"}), ROOM_QUEUES, CIDS3)
    assert [named(got[c]) for c in CIDS3] == [
        ["hz@a:0", "hz@a:1", "sh@b:2"],
        ["hz@a:2", "hz@a:3", "sh@b:3"],
        ["sh@b:0", "sh@b:1"],
    ]


def test_machine_room_filters_by_room():
    got = shares(AllocateByMachineRoom(["sh"]), ROOM_QUEUES, ["c0", "c1"])
    assert [named(got[c]) for c in ["c0", "c1"]] == [["sh@b:0", "sh@b:1"], ["sh@b:2", "sh@b:3"]]
    # "broker-c" has no room; "broker" is no room of "broker-c"
    assert AllocateByMachineRoom("broker").allocate("g", "c0", ROOM_QUEUES, ["c0"]) == []
    # rooms as a comma-separated string
    assert AllocateByMachineRoom(" hz, sh ").rooms == {"hz", "sh"}


def test_machine_room_fewer_queues_than_consumers():
    got = shares(AllocateByMachineRoom({"hz"}), queues(2, broker="hz@a"), CIDS3)
    assert [named(got[c]) for c in CIDS3] == [["hz@a:0"], ["hz@a:1"], []]


# --- MACHINE_ROOM_NEARBY ---------------------------------------------------------------------

NEARBY_QUEUES = queues(4, broker="hz@a") + queues(3, broker="sh@b") + queues(5, broker="bj@c")
NEARBY_CIDS = ["hz@1", "hz@2", "sh@1"]


def test_nearby_keeps_rooms_local_and_spreads_rooms_without_consumers():
    got = shares(AllocateMachineRoomNearby("AVG"), NEARBY_QUEUES, NEARBY_CIDS)
    assert_partition(got, NEARBY_QUEUES)
    hz = {mq for c in ("hz@1", "hz@2") for mq in got[c] if mq.broker_name == "hz@a"}
    assert hz == set(queues(4, broker="hz@a"))
    assert [named(got[c]) for c in NEARBY_CIDS] == [
        ["bj@c:0", "bj@c:1", "hz@a:0", "hz@a:1"],
        ["bj@c:2", "bj@c:3", "hz@a:2", "hz@a:3"],
        ["bj@c:4", "sh@b:0", "sh@b:1", "sh@b:2"],
    ]
    # a room's own queues never go to another room's consumers
    assert not [mq for mq in got["sh@1"] if mq.broker_name == "hz@a"]


def test_nearby_room_with_queues_but_consumer_elsewhere_only():
    # no consumer in bj, and no queue in the consumers' room gz
    got = shares(AllocateMachineRoomNearby(), queues(3, broker="bj@c"), ["gz@1", "gz@2"])
    assert [named(got[c]) for c in ["gz@1", "gz@2"]] == [["bj@c:0", "bj@c:1"], ["bj@c:2"]]


def test_nearby_custom_resolvers_and_delegate_instance():
    strategy = AllocateMachineRoomNearby(
        AllocateAveragelyByCircle(),
        queue_room=lambda mq: mq.broker_name.split("-")[0],
        consumer_room=lambda cid: cid.split("-")[0],
    )
    assert strategy.name == "MACHINE_ROOM_NEARBY-AVG_BY_CIRCLE"
    mq_all = queues(4, broker="hz-a") + queues(2, broker="sh-b")
    got = shares(strategy, mq_all, ["hz-1", "hz-2"])
    assert [named(got[c]) for c in ["hz-1", "hz-2"]] == [
        ["hz-a:0", "hz-a:2", "sh-b:0"],
        ["hz-a:1", "hz-a:3", "sh-b:1"],
    ]


def test_nearby_empty_room_is_an_error():
    strategy = AllocateMachineRoomNearby(consumer_room=lambda cid: "")
    with pytest.raises(ClientError, match="consumer c0"):
        strategy.allocate("g", "c0", queues(2), ["c0"])


# --- properties ------------------------------------------------------------------------------

ROOMS = ["hz", "sh", "bj", "gz"]

mq_lists = st.lists(
    st.builds(
        MessageQueue,
        st.sampled_from(["A", "B"]),
        st.sampled_from([f"{room}@{b}" for room in ROOMS for b in ("x", "y")]),
        st.integers(0, 7),
    ),
    unique=True,
    max_size=40,
)
cid_lists = st.lists(
    st.builds(lambda room, n: f"{room}@10.0.0.{n}", st.sampled_from(ROOMS), st.integers(0, 9)),
    unique=True,
    min_size=1,
    max_size=8,
)
partitioning = st.sampled_from(
    [
        AllocateAveragely(),
        AllocateAveragelyByCircle(),
        AllocateConsistentHash(),
        AllocateConsistentHash(virtual_nodes=3),
        AllocateByMachineRoom(ROOMS),
        AllocateMachineRoomNearby("AVG"),
        AllocateMachineRoomNearby("AVG_BY_CIRCLE"),
        AllocateMachineRoomNearby(AllocateConsistentHash()),
    ]
)


@settings(max_examples=60, deadline=None)
@given(strategy=partitioning, mq_all=mq_lists, cid_all=cid_lists, data=st.data())
def test_every_queue_to_exactly_one_consumer_in_any_order(strategy, mq_all, cid_all, data):
    got = shares(strategy, mq_all, cid_all)
    assert_partition(got, mq_all)
    for share in got.values():
        assert share == sorted(share)
    shuffled_mqs = data.draw(st.permutations(mq_all + mq_all[:3]))
    shuffled_cids = data.draw(st.permutations(cid_all + cid_all[:1]))
    for cid in cid_all:
        assert strategy.allocate("g", cid, shuffled_mqs, shuffled_cids) == got[cid]


@settings(max_examples=60, deadline=None)
@given(mq_all=mq_lists, cid_all=cid_lists)
def test_avg_sizes_differ_by_at_most_one(mq_all, cid_all):
    sizes = [len(share) for share in shares(AllocateAveragely(), mq_all, cid_all).values()]
    assert max(sizes) - min(sizes) <= 1
    sizes = [len(s) for s in shares(AllocateAveragelyByCircle(), mq_all, cid_all).values()]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=40, deadline=None)
@given(mq_all=mq_lists, cid_all=cid_lists, new=st.text("abc", min_size=1, max_size=3))
def test_consistent_hash_join_moves_queues_only_to_the_newcomer(mq_all, cid_all, new):
    strategy = AllocateConsistentHash()
    grown = sorted(set(cid_all) | {new})
    before = {mq: c for c, share in shares(strategy, mq_all, cid_all).items() for mq in share}
    after = {mq: c for c, share in shares(strategy, mq_all, grown).items() for mq in share}
    assert all(after[mq] in (before[mq], new) for mq in mq_all)


# --- factory ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("AVG", AllocateAveragely),
        ("avg", AllocateAveragely),
        ("Avg_By_Circle", AllocateAveragelyByCircle),
        ("CONSISTENT_HASH", AllocateConsistentHash),
        ("machine_room_nearby", AllocateMachineRoomNearby),
        ("AllocateMessageQueueAveragely", AllocateAveragely),
        ("allocatemessagequeueaveragelybycircle", AllocateAveragelyByCircle),
        ("AllocateMessageQueueConsistentHash", AllocateConsistentHash),
        (
            "org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely",
            AllocateAveragely,
        ),
        ("AllocateMachineRoomNearby", AllocateMachineRoomNearby),
        ("AllocateAveragely", AllocateAveragely),
        (" AVG ", AllocateAveragely),
    ],
)
def test_factory_names(name, cls):
    strategy = allocation_strategy(name)
    assert type(strategy) is cls
    assert isinstance(strategy, AllocateMessageQueueStrategy)


def test_factory_names_match_rocketmq():
    assert [allocation_strategy(n).name for n in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH")] == [
        "AVG",
        "AVG_BY_CIRCLE",
        "CONSISTENT_HASH",
    ]
    assert allocation_strategy("CONFIG", queues=[]).name == "CONFIG"
    assert allocation_strategy("MACHINE_ROOM", rooms={"hz"}).name == "MACHINE_ROOM"
    assert AllocateMachineRoomNearby.name == "MACHINE_ROOM_NEARBY"
    assert allocation_strategy("MACHINE_ROOM_NEARBY").name == "MACHINE_ROOM_NEARBY-AVG"


def test_factory_options():
    assert allocation_strategy("CONSISTENT_HASH", virtual_nodes=5).virtual_nodes == 5
    assert allocation_strategy("consistent_hash").virtual_nodes == 10
    configured = queues(2)
    assert allocation_strategy("CONFIG", queues=configured).allocate("g", "c", [], []) == (
        configured
    )
    assert allocation_strategy("AllocateMessageQueueByMachineRoom", rooms=["hz"]).rooms == {"hz"}
    nearby = allocation_strategy("MACHINE_ROOM_NEARBY", delegate="AVG_BY_CIRCLE")
    assert isinstance(nearby.delegate, AllocateAveragelyByCircle)
    inner = AllocateConsistentHash(virtual_nodes=2)
    assert allocation_strategy("MACHINE_ROOM_NEARBY", delegate=inner).delegate is inner
    named_inner = allocation_strategy("machine_room_nearby-consistent_hash")
    assert isinstance(named_inner.delegate, AllocateConsistentHash)
    assert named_inner.name == "MACHINE_ROOM_NEARBY-CONSISTENT_HASH"


def test_factory_unknown_name_lists_valid_names():
    with pytest.raises(ConfigError) as err:
        allocation_strategy("ROUND_ROBIN")
    message = str(err.value)
    assert "'ROUND_ROBIN'" in message
    for name in ("AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH", "CONFIG", "MACHINE_ROOM"):
        assert name in message
    assert "MACHINE_ROOM_NEARBY" in message
    with pytest.raises(ConfigError, match="None"):
        allocation_strategy(None)
    with pytest.raises(ConfigError, match="'NOPE'"):
        allocation_strategy("MACHINE_ROOM_NEARBY", delegate="NOPE")


def test_factory_bad_options():
    with pytest.raises(ConfigError, match="no option 'virtual_nodes'"):
        allocation_strategy("AVG", virtual_nodes=3)
    with pytest.raises(ConfigError, match=r"no option 'nodes'.*virtual_nodes"):
        allocation_strategy("CONSISTENT_HASH", nodes=3)
    with pytest.raises(ConfigError, match="needs option 'queues'"):
        allocation_strategy("CONFIG")
    with pytest.raises(ConfigError, match="needs option 'rooms'"):
        allocation_strategy("MACHINE_ROOM")
    with pytest.raises(ConfigError, match="delegate"):
        allocation_strategy("MACHINE_ROOM_NEARBY-AVG", delegate="AVG")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: AllocateConsistentHash(0), "at least 1, not 0"),
        (lambda: AllocateConsistentHash(-3), "at least 1, not -3"),
        (lambda: AllocateConsistentHash("3"), "int, not '3'"),
        (lambda: AllocateConsistentHash(True), "int, not True"),
        (lambda: AllocateConsistentHash(hash_function=5), "callable, not 5"),
        (lambda: AllocateByConfig("T"), "not 'T'"),
        (lambda: AllocateByConfig(None), "not None"),
        (lambda: AllocateByConfig(["q"]), "'q'"),
        (lambda: AllocateByMachineRoom([]), "at least one room"),
        (lambda: AllocateByMachineRoom(None), "at least one room"),
        (lambda: AllocateByMachineRoom(""), "at least one room"),
        (lambda: AllocateByMachineRoom(["hz@a"]), "'hz@a'"),
        (lambda: AllocateByMachineRoom([""]), "''"),
        (lambda: AllocateByMachineRoom(5), "not 5"),
        (lambda: AllocateMachineRoomNearby(5), "not 5"),
        (lambda: AllocateMachineRoomNearby(queue_room="hz"), r"queue_room.*'hz'"),
        (lambda: AllocateMachineRoomNearby(consumer_room=1), r"consumer_room.*1"),
    ],
)
def test_bad_constructor_options(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_repr_names_the_options():
    assert repr(AllocateConsistentHash(5)) == "AllocateConsistentHash(virtual_nodes=5)"
    assert repr(AllocateByMachineRoom({"sh", "hz"})) == "AllocateByMachineRoom(['hz', 'sh'])"
    assert repr(AllocateMachineRoomNearby()) == "AllocateMachineRoomNearby(AllocateAveragely())"
