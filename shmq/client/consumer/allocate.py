"""Queue allocation strategies for clustering consumers (RocketMQ 4.9's
``AllocateMessageQueueStrategy`` and its six implementations).

Nobody hands out queues in a consumer group. Every consumer of the group runs the same
strategy on its own, over the topic's queues (``mq_all``) and the group's live client ids
(``cid_all``), and keeps only its own share. The shares fit together (each queue read by
exactly one consumer) only if every consumer computes from *identical* inputs: the strategies
are positional (AVG gives consumer number ``index`` a block of positions, AVG_BY_CIRCLE every
``len(cid_all)``-th position, MACHINE_ROOM a slice), so two consumers that saw the same queues
in a different order, or the same client ids in a different order, would each take a share of a
*different* list: some queues would be read twice and others never. That is why every
``allocate`` here first sorts its inputs (queues by ``(topic, broker_name, queue_id)``, client
ids as strings) and drops duplicates, so callers may pass lists in any order, as the route and
the broker's member list happen to come. The results are sorted by the same key.

A consumer that is not (yet) in ``cid_all`` gets no queue, as in RocketMQ: it takes part from
the next rebalance, once the broker lists it.

Example::

    strategy = allocation_strategy("AVG")
    mine = strategy.allocate("my-group", my_client_id, mq_all, cid_all)

Names (``allocation_strategy`` accepts them in any case, and RocketMQ's class names too):
``AVG`` (the default), ``AVG_BY_CIRCLE``, ``CONSISTENT_HASH``, ``CONFIG``, ``MACHINE_ROOM`` and
``MACHINE_ROOM_NEARBY``.
"""

from __future__ import annotations

import abc
import hashlib
import inspect
import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from shmq.client.types import MessageQueue
from shmq.errors import ClientError, ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "AllocateAveragely",
    "AllocateAveragelyByCircle",
    "AllocateByConfig",
    "AllocateByMachineRoom",
    "AllocateConsistentHash",
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueStrategy",
    "allocation_strategy",
    "md5_hash",
    "room_before_at",
]


class AllocateMessageQueueStrategy(abc.ABC):
    """How a clustering consumer group shares a topic's queues (RocketMQ's
    ``AllocateMessageQueueStrategy``).

    ``allocate(consumer_group, current_cid, mq_all, cid_all)`` returns the queues of
    ``current_cid``; every consumer of the group calls it with the same queues and client ids
    and gets its own share. ``name`` is RocketMQ's name of the strategy.

    A custom strategy subclasses this and implements ``allocate``; it must be a pure function of
    its arguments (see the module docstring).

    Example::

        class Everything(AllocateMessageQueueStrategy):
            name = "EVERYTHING"

            def allocate(self, consumer_group, current_cid, mq_all, cid_all):
                return sorted(mq_all)
    """

    name: str

    @abc.abstractmethod
    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        """The queues of ``current_cid`` among ``mq_all`` shared by ``cid_all``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# --- input checks -------------------------------------------------------------------------


def _check_group_and_cid(consumer_group: Any, current_cid: Any) -> None:
    if not isinstance(consumer_group, str):
        raise ClientError(f"consumer_group must be a str, not {consumer_group!r}")
    if not isinstance(current_cid, str) or not current_cid:
        raise ClientError(f"current_cid must be a non-empty client id, not {current_cid!r}")


def _items(value: Any, what: str) -> list:
    if value is None or isinstance(value, (str, bytes, MessageQueue)):
        raise ClientError(f"{what} must be a sequence, not {value!r}")
    try:
        return list(value)
    except TypeError:
        raise ClientError(f"{what} must be a sequence, not {value!r}") from None


def _sorted_queues(mq_all: Any) -> list[MessageQueue]:
    """``mq_all`` without duplicates, sorted by (topic, broker_name, queue_id)."""
    queues = _items(mq_all, "mq_all")
    for mq in queues:
        if not isinstance(mq, MessageQueue):
            raise ClientError(f"mq_all holds {mq!r}, which is not a MessageQueue")
    return sorted(set(queues))


def _sorted_cids(cid_all: Any) -> list[str]:
    """``cid_all`` without duplicates, sorted as strings."""
    cids = _items(cid_all, "cid_all")
    for cid in cids:
        if not isinstance(cid, str) or not cid:
            raise ClientError(f"cid_all holds {cid!r}, which is not a non-empty client id")
    return sorted(set(cids))


class _SortedInputStrategy(AllocateMessageQueueStrategy):
    """The common frame of the built-in strategies (RocketMQ's ``check()``): check and sort the
    inputs, give a client that is not in ``cid_all`` nothing, then ``_share``."""

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        _check_group_and_cid(consumer_group, current_cid)
        queues = _sorted_queues(mq_all)
        cids = _sorted_cids(cid_all)
        if current_cid not in cids:
            log.info(
                "consumer group %s: client %s is not in the group's client ids %s; "
                "it gets no queue",
                consumer_group,
                current_cid,
                cids,
            )
            return []
        if not queues:
            return []
        return self._share(consumer_group, current_cid, cids.index(current_cid), queues, cids)

    @abc.abstractmethod
    def _share(
        self,
        consumer_group: str,
        current_cid: str,
        index: int,
        queues: list[MessageQueue],
        cids: list[str],
    ) -> list[MessageQueue]:
        """``current_cid``'s share; ``queues`` and ``cids`` are sorted, deduplicated and
        non-empty, and ``cids[index] == current_cid``."""


# --- AVG, AVG_BY_CIRCLE ----------------------------------------------------------------------


class AllocateAveragely(_SortedInputStrategy):
    """``AVG`` (RocketMQ's default, ``AllocateMessageQueueAveragely``): contiguous blocks, the
    first ``len(mq_all) % len(cid_all)`` consumers taking one queue more. With more consumers
    than queues, the last consumers get nothing.

    Example (8 queues q0..q7, consumers c0, c1, c2)::

        queues = [MessageQueue("T", "broker-a", i) for i in range(8)]
        AllocateAveragely().allocate("g", "c1", queues, ["c0", "c1", "c2"])
        # -> queues 3, 4, 5; c0 gets 0, 1, 2 and c2 gets 6, 7
    """

    name = "AVG"

    def _share(self, consumer_group, current_cid, index, queues, cids):
        m, c = len(queues), len(cids)
        mod = m % c
        bigger = mod > 0 and index < mod  # one of the first `mod` consumers: one queue more
        if m <= c:
            avg = 1
        elif bigger:
            avg = m // c + 1
        else:
            avg = m // c
        start = index * avg if bigger else index * avg + mod
        return [queues[(start + i) % m] for i in range(min(avg, m - start))]


class AllocateAveragelyByCircle(_SortedInputStrategy):
    """``AVG_BY_CIRCLE`` (``AllocateMessageQueueAveragelyByCircle``): dealt like cards, queue
    ``i`` goes to consumer ``i % len(cid_all)``.

    Example (8 queues q0..q7, consumers c0, c1, c2)::

        queues = [MessageQueue("T", "broker-a", i) for i in range(8)]
        AllocateAveragelyByCircle().allocate("g", "c0", queues, ["c0", "c1", "c2"])
        # -> queues 0, 3, 6; c1 gets 1, 4, 7 and c2 gets 2, 5
    """

    name = "AVG_BY_CIRCLE"

    def _share(self, consumer_group, current_cid, index, queues, cids):
        return queues[index :: len(cids)]


# --- CONSISTENT_HASH -------------------------------------------------------------------------


def md5_hash(key: str) -> int:
    """RocketMQ's ``MD5Hash``: the first 4 bytes of MD5(UTF-8 ``key``) as an unsigned
    big-endian number (0 .. 2**32 - 1).

    Example::

        >>> md5_hash("c0-0") == int.from_bytes(hashlib.md5(b"c0-0").digest()[:4], "big")
        True
    """
    digest = hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()
    return int.from_bytes(digest[:4], "big")


class AllocateConsistentHash(_SortedInputStrategy):
    """``CONSISTENT_HASH`` (``AllocateMessageQueueConsistentHash``): a hash ring with
    ``virtual_nodes`` nodes per consumer, keyed ``hash(cid + "-" + i)`` for ``i`` in
    ``0 .. virtual_nodes - 1``; each queue goes to the first node at or after
    ``hash(str(queue))``, wrapping round to the lowest. When two nodes hash alike, the one added
    later (the later client id in sorted order) keeps the place, as in RocketMQ's TreeMap.
    A consumer joining or leaving moves only the queues it takes or gives up.

    ``hash_function`` (``str -> int``) replaces RocketMQ's ``md5_hash``; every consumer of
    the group must use the same one.

    The ring is built on every call from the arguments (nothing cached), so it is never stale.

    Example (8 queues of topic T on broker-a, consumers c0, c1, c2)::

        queues = [MessageQueue("T", "broker-a", i) for i in range(8)]
        AllocateConsistentHash().allocate("g", "c1", queues, ["c0", "c1", "c2"])
        # -> queues 3, 4; c0 gets 0, 1, 5, 6 and c2 gets 2, 7
    """

    name = "CONSISTENT_HASH"

    def __init__(
        self, virtual_nodes: int = 10, hash_function: Callable[[str], int] | None = None
    ) -> None:
        if isinstance(virtual_nodes, bool) or not isinstance(virtual_nodes, int):
            raise ConfigError(f"virtual_nodes must be an int, not {virtual_nodes!r}")
        if virtual_nodes < 1:
            raise ConfigError(f"virtual_nodes must be at least 1, not {virtual_nodes}")
        if hash_function is not None and not callable(hash_function):
            raise ConfigError(f"hash_function must be callable, not {hash_function!r}")
        self.virtual_nodes = virtual_nodes
        self.hash_function = hash_function or md5_hash

    def __repr__(self) -> str:
        extra = "" if self.hash_function is md5_hash else f", hash_function={self.hash_function!r}"
        return f"{type(self).__name__}(virtual_nodes={self.virtual_nodes}{extra})"

    def _share(self, consumer_group, current_cid, index, queues, cids):
        owner_of: dict[int, str] = {}
        for cid in cids:  # sorted: on a collision the later client id wins
            for i in range(self.virtual_nodes):
                owner_of[self.hash_function(f"{cid}-{i}")] = cid
        ring = sorted(owner_of)
        mine = []
        for mq in queues:
            at = bisect_left(ring, self.hash_function(str(mq)))
            if owner_of[ring[at % len(ring)]] == current_cid:
                mine.append(mq)
        return mine


# --- CONFIG ----------------------------------------------------------------------------------


class AllocateByConfig(AllocateMessageQueueStrategy):
    """``CONFIG`` (``AllocateMessageQueueByConfig``): exactly the configured queues, in the
    order given, whatever the inputs (the arguments are only type-checked). Each consumer is
    configured with its own list; nothing checks that the lists of a group fit together.

    Example::

        >>> mine = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
        >>> AllocateByConfig(mine).allocate("g", "c0", [], ["c0"]) == mine
        True
    """

    name = "CONFIG"

    def __init__(self, queues: Iterable[MessageQueue]) -> None:
        if queues is None or isinstance(queues, (str, bytes, MessageQueue)):
            raise ConfigError(f"queues must be a list of MessageQueue, not {queues!r}")
        try:
            items = tuple(queues)
        except TypeError:
            raise ConfigError(f"queues must be a list of MessageQueue, not {queues!r}") from None
        for mq in items:
            if not isinstance(mq, MessageQueue):
                raise ConfigError(f"queues holds {mq!r}, which is not a MessageQueue")
        self.queues = items

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.queues)!r})"

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Sequence[MessageQueue],
        cid_all: Sequence[str],
    ) -> list[MessageQueue]:
        _check_group_and_cid(consumer_group, current_cid)
        return list(self.queues)


# --- MACHINE_ROOM, MACHINE_ROOM_NEARBY --------------------------------------------------------


def room_before_at(name: str) -> str:
    """The default room resolver: the part of a broker name or client id before its first
    ``@`` (the whole name when it has none).

    Example::

        >>> room_before_at("hz@broker-a"), room_before_at("broker-c")
        ('hz', 'broker-c')
    """
    return name.split("@", 1)[0]


class AllocateByMachineRoom(_SortedInputStrategy):
    """``MACHINE_ROOM`` (``AllocateMessageQueueByMachineRoom``): only queues of brokers named
    ``room@name`` whose room is one of ``rooms`` (RocketMQ's ``consumeridcs``; brokers named
    without ``@`` are left out), shared by all consumers: with ``n`` such queues and ``C``
    consumers, ``mod, rem = divmod(n, C)``; consumer ``index`` takes positions
    ``[index*mod, index*mod + mod)``, plus position ``index + mod*C`` when ``rem > index``.

    ``rooms`` is an iterable of room names, or one string of comma-separated names.

    Example (hz@a queues 0-3, sh@b queues 0-3, broker-c queues 0-1; consumers c0, c1, c2)::

        AllocateByMachineRoom({"hz", "sh"}).allocate("g", "c0", queues, ["c0", "c1", "c2"])
        # -> hz@a 0, 1 and sh@b 2; c1 gets hz@a 2, 3 and sh@b 3; c2 gets sh@b 0, 1;
        #    nobody gets broker-c's queues
    """

    name = "MACHINE_ROOM"

    def __init__(self, rooms: Iterable[str] | str) -> None:
        if isinstance(rooms, str):
            names: list = [r.strip() for r in rooms.split(",") if r.strip()]
        elif rooms is None:
            names = []
        else:
            try:
                names = list(rooms)
            except TypeError:
                raise ConfigError(f"rooms must be a set of room names, not {rooms!r}") from None
        for room in names:
            if not isinstance(room, str) or not room or "@" in room:
                raise ConfigError(f"rooms holds {room!r}; a room is a non-empty name without '@'")
        if not names:
            raise ConfigError(f"MACHINE_ROOM needs at least one room in rooms, got {rooms!r}")
        self.rooms = frozenset(names)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.rooms)!r})"

    def _share(self, consumer_group, current_cid, index, queues, cids):
        kept = [
            mq
            for mq in queues
            if "@" in mq.broker_name and room_before_at(mq.broker_name) in self.rooms
        ]
        c = len(cids)
        mod, rem = divmod(len(kept), c)
        mine = kept[index * mod : index * mod + mod]
        if rem > index:
            mine.append(kept[index + mod * c])
        return mine


class AllocateMachineRoomNearby(_SortedInputStrategy):
    """``MACHINE_ROOM_NEARBY`` (``AllocateMachineRoomNearby``): consumers read the queues of
    their own machine room; the queues of a room with no live consumer are shared by all
    consumers. Both sharings use ``delegate`` (a strategy, or its name; default ``AVG``):

    1. the queues of my room, shared among the consumers of my room;
    2. for every other room that has queues but no consumer, its queues shared among all
       consumers.

    ``queue_room(mq) -> str`` and ``consumer_room(cid) -> str`` say where a broker and a
    consumer are (RocketMQ's ``MachineRoomResolver``). Both default to the part of the broker
    name or client id before its first ``@`` (the whole name when it has none), so brokers
    should be named ``room@name`` and consumers need client ids starting ``room@`` for the
    defaults to be useful; otherwise pass your own functions. Every consumer of the group must
    resolve rooms alike.

    ``name`` is RocketMQ's ``MACHINE_ROOM_NEARBY-<delegate's name>``.

    Example (hz@a queues 0-1, sh@b queues 0-1, bj@c queues 0-1; consumers hz@1, hz@2, sh@1)::

        nearby = AllocateMachineRoomNearby("AVG")
        nearby.allocate("g", "hz@1", queues, ["hz@1", "hz@2", "sh@1"])
        # -> bj@c 0 and hz@a 0; hz@2 gets bj@c 1 and hz@a 1; sh@1 gets sh@b 0, 1
        #    (bj has no consumer, so all three share its queues)
    """

    name = "MACHINE_ROOM_NEARBY"

    def __init__(
        self,
        delegate: AllocateMessageQueueStrategy | str = "AVG",
        *,
        queue_room: Callable[[MessageQueue], str] | None = None,
        consumer_room: Callable[[str], str] | None = None,
    ) -> None:
        if isinstance(delegate, str):
            delegate = allocation_strategy(delegate)
        elif not isinstance(delegate, AllocateMessageQueueStrategy):
            raise ConfigError(
                f"delegate must be an allocation strategy or its name, not {delegate!r}"
            )
        for what, fn in (("queue_room", queue_room), ("consumer_room", consumer_room)):
            if fn is not None and not callable(fn):
                raise ConfigError(f"{what} must be callable, not {fn!r}")
        self.delegate = delegate
        self.queue_room = queue_room or (lambda mq: room_before_at(mq.broker_name))
        self.consumer_room = consumer_room or room_before_at
        self.name = f"MACHINE_ROOM_NEARBY-{delegate.name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.delegate!r})"

    @staticmethod
    def _room(resolver: Callable[[Any], str], item: Any, what: str) -> str:
        room = resolver(item)
        if not isinstance(room, str) or not room:
            raise ClientError(f"the room of {what} {item} is {room!r}, not a non-empty name")
        return room

    def _share(self, consumer_group, current_cid, index, queues, cids):
        queues_in: dict[str, list[MessageQueue]] = {}
        for mq in queues:
            queues_in.setdefault(self._room(self.queue_room, mq, "queue"), []).append(mq)
        consumers_in: dict[str, list[str]] = {}
        for cid in cids:
            consumers_in.setdefault(self._room(self.consumer_room, cid, "consumer"), []).append(cid)
        my_room = self._room(self.consumer_room, current_cid, "consumer")
        mine: list[MessageQueue] = []
        near = queues_in.pop(my_room, [])
        if near:
            mine += self.delegate.allocate(consumer_group, current_cid, near, consumers_in[my_room])
        for room in sorted(queues_in):
            if room not in consumers_in:  # nobody reads this room nearby: everybody shares it
                mine += self.delegate.allocate(consumer_group, current_cid, queues_in[room], cids)
        return sorted(mine)


# --- factory ---------------------------------------------------------------------------------

_STRATEGIES: tuple[type[AllocateMessageQueueStrategy], ...] = (
    AllocateAveragely,
    AllocateAveragelyByCircle,
    AllocateConsistentHash,
    AllocateByConfig,
    AllocateByMachineRoom,
    AllocateMachineRoomNearby,
)

# RocketMQ's class names (org.apache.rocketmq.client.consumer.rebalance.*)
_ROCKETMQ_CLASS_NAMES = {
    "AllocateMessageQueueAveragely": AllocateAveragely,
    "AllocateMessageQueueAveragelyByCircle": AllocateAveragelyByCircle,
    "AllocateMessageQueueConsistentHash": AllocateConsistentHash,
    "AllocateMessageQueueByConfig": AllocateByConfig,
    "AllocateMessageQueueByMachineRoom": AllocateByMachineRoom,
    "AllocateMachineRoomNearby": AllocateMachineRoomNearby,
}

_BY_KEY: dict[str, type[AllocateMessageQueueStrategy]] = {}
for _cls in _STRATEGIES:
    _BY_KEY[_cls.name.upper()] = _cls
    _BY_KEY[_cls.__name__.upper()] = _cls
for _java, _cls in _ROCKETMQ_CLASS_NAMES.items():
    _BY_KEY[_java.upper()] = _cls

_NEARBY_PREFIX = AllocateMachineRoomNearby.name + "-"


def _valid_names() -> str:
    return ", ".join(cls.name for cls in _STRATEGIES)


def allocation_strategy(name: str, **options: Any) -> AllocateMessageQueueStrategy:
    """A strategy by name, built with ``options`` as its constructor's keyword arguments.

    ``name`` is one of ``AVG``, ``AVG_BY_CIRCLE``, ``CONSISTENT_HASH``, ``CONFIG``,
    ``MACHINE_ROOM``, ``MACHINE_ROOM_NEARBY`` in any case, or a class name (shmq's, or
    RocketMQ's such as ``AllocateMessageQueueAveragely``, with or without its Java package).
    ``MACHINE_ROOM_NEARBY-<inner>`` (RocketMQ's name of a nearby strategy) means
    ``MACHINE_ROOM_NEARBY`` with ``delegate=<inner>``.

    Raises ConfigError for an unknown name, an unknown or missing option, or a bad value.

    Example::

        allocation_strategy("avg")
        allocation_strategy("CONSISTENT_HASH", virtual_nodes=5)
        allocation_strategy("MACHINE_ROOM", rooms={"hz", "sh"})
        allocation_strategy("MACHINE_ROOM_NEARBY", delegate="AVG_BY_CIRCLE")
        allocation_strategy("AllocateMessageQueueAveragelyByCircle")
    """
    if not isinstance(name, str):
        raise ConfigError(
            f"allocation strategy name must be a str, not {name!r}; valid: {_valid_names()}"
        )
    key = name.strip().rsplit(".", 1)[-1].upper()
    if key.startswith(_NEARBY_PREFIX) and len(key) > len(_NEARBY_PREFIX):
        if "delegate" in options:
            raise ConfigError(
                f"allocation strategy {name!r} names its delegate; "
                f"do not pass delegate={options['delegate']!r} too"
            )
        options = {**options, "delegate": key[len(_NEARBY_PREFIX) :]}
        key = AllocateMachineRoomNearby.name
    cls = _BY_KEY.get(key)
    if cls is None:
        raise ConfigError(f"unknown allocation strategy {name!r}; valid: {_valid_names()}")
    params = inspect.signature(cls).parameters
    accepted = [
        p.name
        for p in params.values()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"allocation strategy {cls.name} has no option {', '.join(map(repr, unknown))}; "
            f"its options: {', '.join(accepted) or '(none)'}"
        )
    missing = [
        p for p in accepted if params[p].default is inspect.Parameter.empty and p not in options
    ]
    if missing:
        raise ConfigError(
            f"allocation strategy {cls.name} needs option {', '.join(map(repr, missing))}"
        )
    return cls(**options)
