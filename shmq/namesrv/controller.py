"""The controller (RocketMQ 5's controller mode, simplified): who is master of each broker
group, at which epoch, and which slave takes over when the master's heartbeats stop.

Each broker in controller mode reports, with every heartbeat (its REGISTER_BROKER, or
CONTROLLER_REGISTER_BROKER once at start), its role, the last epoch it holds data of and its
CommitLog max offset. The controller answers with the role the broker must have
(``RoleDecision``): the group's master, or a slave of it, with the offset to truncate its
CommitLog to when it holds data of an epoch that another master ended.

Epochs: the first master of a group bootstraps epoch 1 starting at its max offset. When the
master's heartbeats stop for ``heartbeat_timeout_ms``, ``scan`` elects, from the slaves that
are in sync (alive, at the current epoch, and in a SYNC group's recorded sync state set, or
in an ASYNC group at most ``max_gap_not_in_sync`` bytes behind the master's last report),
the one with the highest max offset (ties: the lowest broker id), and
opens epoch N+1 for it (a master that was only slow comes back at its own epoch if no one
was elected); the new master reports where the epoch starts (its CommitLog end
when it stopped replicating) with its first heartbeat as master. A broker that comes back
holding epoch e < N truncates to the start of epoch e+1: anything past it was written by a
master of an epoch that ended and was never replicated to the new master, so a SYNC_MASTER
never acknowledged it. With no in-sync slave, the group has no master until its old master
returns (it keeps its data: nobody else has newer), or, in a SYNC group, a slave of its
recorded sync state set does.

A SYNC_MASTER group keeps its guarantee across elections (RocketMQ 5's SyncStateSet with
allAckInSyncStateSet): its master reports with each heartbeat its sync state set, the HA
connections whose acks every send waits for (``broker.sync_state``), and the controller
records the slaves they belong to (each slave reports its HA connection's address with its
own heartbeats); only a slave of the recorded set is elected, since only those hold every
acknowledged send. The master acknowledges sends without a slave only after the controller
recorded the set empty (``alone``, the answer's ``controllerAlone``); while a group is alone
no slave may be elected. An elected master starts alone and takes the group's master role
(``controllerMasterRole``), so a SYNC group stays SYNC after a failover. An ASYNC group's
master reports no set: its slaves are electable by the gap.

Each group's master, role, sync state set and epochs are persisted (``store_path``, RocketMQ 5's
``controllerStorePath``) whenever they change, before the answer that announces them: a
restarted controller keeps them, so a former master that reports first after the restart
is told to truncate and follow, never made master again beside the elected one. A master
it knew that never reports again is replaced ``heartbeat_timeout_ms`` after the restart.
Without a store the state is in memory (tests, an embedded NameServer): a restarted
controller relearns masters from heartbeats. One lock guards everything.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field

from shmq import json_file
from shmq.errors import ConfigError, EpochNotReadyError

log = logging.getLogger(__name__)

MASTER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
BROKER_ROLES = (*MASTER_ROLES, "SLAVE")
HEARTBEAT_TIMEOUT_MS = 10_000  # RocketMQ 5's controllerHeartBeatTimeoutMills
MAX_GAP_NOT_IN_SYNC = 256 * 1024 * 1024  # RocketMQ 5's haMaxGapNotInSync
MAX_SYNC_STATE_SET = 16  # members a master reports at most (its HA table's rows)
START_GRACE_MS = 300_000  # a broker that asked its role at start may take this long to serve
MASTER_ID = 0
NO_TRUNCATE = -1
# RocketMQ 5's controllerStorePath is ~/DledgerController
DEFAULT_STORE_PATH = os.path.join(os.path.expanduser("~"), "shmq", "controller")


@dataclass
class EpochEntry:
    epoch: int
    start_offset: int  # -1 until the new master reports it
    master_addr: str


@dataclass
class Replica:
    broker_id: int
    role: str
    epoch: int
    max_offset: int
    last_seen_ms: int
    ha_client_addr: str = ""  # a slave: its HA connection's address, as the master sees it


@dataclass(frozen=True)
class RoleDecision:
    """What a broker must be: ``role`` "MASTER" or "SLAVE", its broker id, the group's
    epoch and master, the offset to truncate its CommitLog to (-1: none), the role the
    group's masters run ("" while unknown) and whether the master is recorded alone."""

    role: str
    broker_id: int
    epoch: int
    master_addr: str
    truncate_offset: int = NO_TRUNCATE
    master_role: str = ""
    alone: bool = False

    def to_ext(self) -> dict[str, str]:
        return {
            "controllerRole": self.role,
            "controllerBrokerId": str(self.broker_id),
            "controllerEpoch": str(self.epoch),
            "controllerMasterAddr": self.master_addr,
            "truncateOffset": str(self.truncate_offset),
            "controllerMasterRole": self.master_role,
            "controllerAlone": str(self.alone).lower(),
        }


@dataclass
class BrokerGroup:
    master_addr: str = ""
    epochs: list[EpochEntry] = field(default_factory=list)
    replicas: dict[str, Replica] = field(default_factory=dict)
    loaded_ms: int = -1  # when a restarted controller loaded this group (its master unseen)
    master_role: str = ""  # the role its masters run (the current master's, as reported)
    # a SYNC group: the slaves (broker addresses) whose acks the master's sends wait for,
    # the only electable ones; empty, the master acknowledges alone
    sync_set: frozenset[str] = frozenset()

    @property
    def sync(self) -> bool:
        return self.master_role == "SYNC_MASTER"

    @property
    def alone(self) -> bool:
        return self.sync and not self.sync_set

    @property
    def epoch(self) -> int:
        return self.epochs[-1].epoch if self.epochs else 0

    def start_of(self, epoch: int) -> int:
        for entry in self.epochs:
            if entry.epoch == epoch:
                if entry.start_offset < 0:
                    raise EpochNotReadyError(f"epoch {epoch}'s start offset is not reported yet")
                return entry.start_offset
        return NO_TRUNCATE  # an epoch before this controller's memory: nothing to compare


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_int(name: str, value: object, minimum: int) -> int:
    if type(value) is not int or value < minimum:
        raise ValueError(f"{name} is {value!r}, not an integer >= {minimum}")
    return value


class Controller:
    """Broker groups by brokerName; see the module docstring."""

    def __init__(
        self,
        heartbeat_timeout_ms: int = HEARTBEAT_TIMEOUT_MS,
        max_gap_not_in_sync: int = MAX_GAP_NOT_IN_SYNC,
        store_path: str | None = None,
    ) -> None:
        if heartbeat_timeout_ms <= 0 or max_gap_not_in_sync < 0:
            raise ValueError(
                f"heartbeat_timeout_ms ({heartbeat_timeout_ms}) must be > 0 and "
                f"max_gap_not_in_sync ({max_gap_not_in_sync}) >= 0"
            )
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.max_gap_not_in_sync = max_gap_not_in_sync
        self._lock = threading.Lock()
        self._path = None if store_path is None else os.path.join(store_path, "controller.json")
        self._groups: dict[str, BrokerGroup] = self._load()

    # -- persistence ----------------------------------------------------------------------------

    def _load(self) -> dict[str, BrokerGroup]:
        """The groups of ``controller.json`` (``ConfigError`` when it and its .bak are both
        unreadable: starting empty could elect a second master)."""
        saved = json_file.load(self._path, json.loads) if self._path else None
        if saved is None:
            return {}
        groups = {}
        try:
            for name, g in saved["groups"].items():
                epochs = [EpochEntry(int(e), int(s), str(a)) for e, s, a in g["epochs"]]
                groups[str(name)] = BrokerGroup(
                    str(g["masterAddr"]), epochs, loaded_ms=_now_ms(),
                    master_role=str(g.get("masterRole", "")),
                    sync_set=frozenset(str(a) for a in g.get("syncStateSet", ())),
                )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{self._path} is not a controller state: {exc!r}") from exc
        log.info("controller: %d broker group(s) loaded from %s", len(groups), self._path)
        return groups

    def _persist(self) -> None:
        """Write every group's master and epochs (hold ``_lock``)."""
        if self._path is None:
            return
        groups = {
            name: {
                "masterAddr": g.master_addr,
                "masterRole": g.master_role,
                "syncStateSet": sorted(g.sync_set),
                "epochs": [[e.epoch, e.start_offset, e.master_addr] for e in g.epochs],
            }
            for name, g in sorted(self._groups.items())
        }
        json_file.persist(self._path, json.dumps({"groups": groups}, indent=2))

    def heartbeat(
        self,
        broker_name: str,
        addr: str,
        *,
        role: str,
        broker_id: int,
        epoch: int,
        max_offset: int,
        epoch_start: int = NO_TRUNCATE,
        sync_state_set: tuple[str, ...] | None = None,
        ha_client_addr: str = "",
        starting: bool = False,
        now_ms: int | None = None,
    ) -> RoleDecision:
        """Record a broker's report and decide its role; ``starting``: the report a broker
        sends before it serves (its agents may compile for minutes: it counts as alive for
        ``START_GRACE_MS``, so a slow start is not taken for a dead master).
        ``sync_state_set`` (None: not reported): a SYNC master's members, as the HA
        addresses of their connections; the slaves they belong to (by the
        ``ha_client_addr`` each slave reports) are recorded, persisted before the answer
        (an empty set records the group alone).

        ``ValueError`` for a bad report (an unknown role, a negative number, an epoch the
        controller never opened, a malformed address); ``EpochNotReadyError`` when the broker
        must truncate to an epoch start not known yet."""
        if not broker_name or not addr:
            raise ValueError(f"brokerName {broker_name!r} and brokerAddr {addr!r} are required")
        if role not in BROKER_ROLES:
            raise ValueError(f"brokerRole is {role!r}, not one of {', '.join(BROKER_ROLES)}")
        for name, value in (("brokerId", broker_id), ("epoch", epoch), ("maxOffset", max_offset)):
            _check_int(name, value, 0)
        _check_int("epochStartOffset", epoch_start, NO_TRUNCATE)
        for ha_addr in (*(sync_state_set or ()), *((ha_client_addr,) if ha_client_addr else ())):
            _check_address(ha_addr)
        if sync_state_set is not None and len(sync_state_set) > MAX_SYNC_STATE_SET:
            raise ValueError(f"a sync state set of {len(sync_state_set)} connections, more than"
                             f" {MAX_SYNC_STATE_SET}")  # fmt: skip
        now = _now_ms() if now_ms is None else now_ms
        seen = now + START_GRACE_MS - self.heartbeat_timeout_ms if starting else now
        with self._lock:
            group = self._groups.setdefault(broker_name, BrokerGroup())
            if epoch > group.epoch and not (role in MASTER_ROLES and not group.master_addr):
                raise ValueError(
                    f"epoch {epoch} of {addr} is ahead of the controller's epoch {group.epoch}"
                    f" for {broker_name}"
                )
            resumes = bool(group.epochs) and group.epochs[-1].master_addr == addr
            if not group.master_addr and role in MASTER_ROLES and resumes and epoch == group.epoch:
                group.master_addr = addr  # its own epoch goes on: nobody else wrote since
                log.warning("%s: %s is master again at epoch %d", broker_name, addr, epoch)
                self._persist()
            elif not group.master_addr and resumes and group.epochs[-1].start_offset < 0:
                # elected, but silent before it led: nobody wrote in its epoch, which it
                # now takes (it was electable, so it holds every acknowledged send)
                group.master_addr = addr
                log.warning("%s: %s, elected for epoch %d, is back and leads it", broker_name,
                            addr, group.epoch)  # fmt: skip
                self._persist()
            elif not group.master_addr and role in MASTER_ROLES:
                self._open_epoch(broker_name, group, addr, max(epoch, group.epoch) + 1, max_offset)
            elif (
                addr == group.master_addr
                and group.epochs[-1].start_offset < 0
                and epoch == group.epoch
                and epoch_start >= 0
            ):
                group.epochs[-1].start_offset = epoch_start
                log.info("%s: epoch %d starts at %d", broker_name, epoch, epoch_start)
                self._persist()
            if addr == group.master_addr:
                self._see(group, addr, MASTER_ID, role, epoch, max_offset, seen)
                self._master_state(broker_name, group, role, sync_state_set)
                return RoleDecision("MASTER", MASTER_ID, group.epoch, addr,
                                    master_role=group.master_role, alone=group.alone)  # fmt: skip
            truncate = NO_TRUNCATE
            if epoch < group.epoch and epoch > 0:
                truncate = group.start_of(epoch + 1)
            slave_id = self._slave_id(group, addr, broker_id)
            self._see(group, addr, slave_id, role, epoch, max_offset, seen, ha_client_addr)
            return RoleDecision("SLAVE", slave_id, group.epoch, group.master_addr, truncate,
                                group.master_role, group.alone)  # fmt: skip

    def _master_state(
        self,
        broker_name: str,
        group: BrokerGroup,
        role: str,
        sync_state_set: tuple[str, ...] | None,
    ) -> None:
        """The master's role and sync state set, persisted when they change (before the
        answer: a master acknowledges alone only once the record of it is on disk). A
        member whose slave has not reported that connection yet is not recorded (not
        electable) until it has."""
        role_now = role if role in MASTER_ROLES else group.master_role
        members = group.sync_set
        if role_now != "SYNC_MASTER":
            members = frozenset()
        elif sync_state_set is not None:
            by_connection = {r.ha_client_addr: a for a, r in group.replicas.items()
                             if r.ha_client_addr and a != group.master_addr}  # fmt: skip
            members = frozenset(by_connection[c] for c in sync_state_set if c in by_connection)
        if (role_now, members) != (group.master_role, group.sync_set):
            if members != group.sync_set:
                log.warning("%s: master %s's sync state set: %s", broker_name, group.master_addr,
                            ", ".join(sorted(members))
                            or "none (it acknowledges alone: no slave is electable)")  # fmt: skip
            group.master_role, group.sync_set = role_now, members
            self._persist()

    def _open_epoch(
        self, broker_name: str, group: BrokerGroup, addr: str, epoch: int, start: int
    ) -> None:
        group.master_addr = addr
        group.epochs.append(EpochEntry(epoch, start, addr))
        group.sync_set = frozenset()  # a new master has no slave in sync with it yet
        self._persist()
        log.warning(
            "%s: %s is master at epoch %d (start offset %s)",
            broker_name, addr, epoch, start if start >= 0 else "to be reported",
        )  # fmt: skip

    @staticmethod
    def _see(
        group: BrokerGroup, addr: str, broker_id: int, role: str, epoch: int, offset: int,
        now: int, ha_client_addr: str = "",
    ) -> None:  # fmt: skip
        """Record a report; a slave's HA connection address is its own from now on (a
        broker that claimed it before has reconnected from another). A claim is as fresh
        as the slave's last heartbeat: two slaves that swapped an ephemeral port within one
        heartbeat interval could be named one for the other until the next."""
        if ha_client_addr:
            for other, replica in group.replicas.items():
                if other != addr and replica.ha_client_addr == ha_client_addr:
                    replica.ha_client_addr = ""
        group.replicas[addr] = Replica(broker_id, role, epoch, offset, now, ha_client_addr)

    @staticmethod
    def _slave_id(group: BrokerGroup, addr: str, wanted: int) -> int:
        """The id the broker had as a slave, else the one it asks for if free, else the
        next free id (a former master asks for 0, which a slave cannot have)."""
        known = group.replicas.get(addr)
        if known is not None and known.broker_id != MASTER_ID:
            return known.broker_id
        taken = {r.broker_id for a, r in group.replicas.items() if a != addr}
        if wanted != MASTER_ID and wanted not in taken:
            return wanted
        return max(taken | {MASTER_ID}) + 1

    def scan(self, now_ms: int | None = None) -> list[tuple[str, str]]:
        """Elect a new master for every group whose master's heartbeats stopped; the
        (brokerName, new master addr or "" when no slave is in sync) of each election."""
        now = _now_ms() if now_ms is None else now_ms
        elections = []
        with self._lock:
            for name, group in self._groups.items():
                master = group.replicas.get(group.master_addr)
                seen = master.last_seen_ms if master is not None else group.loaded_ms
                if not group.master_addr:
                    self._elect_returned(name, group, now, elections)
                    continue
                if seen < 0 or seen + self.heartbeat_timeout_ms >= now:
                    continue
                log.warning("%s: master %s silent for %d ms", name, group.master_addr,
                            now - seen)  # fmt: skip
                winner = elect_master(group, now, self.heartbeat_timeout_ms,
                                      self.max_gap_not_in_sync)  # fmt: skip
                if winner:
                    self._open_epoch(name, group, winner, group.epoch + 1, NO_TRUNCATE)
                else:
                    log.error("%s: no in-sync slave; no master until %s returns", name,
                              group.master_addr)  # fmt: skip
                    group.master_addr = ""
                    self._persist()
                elections.append((name, winner))
        return elections

    def _elect_returned(
        self, name: str, group: BrokerGroup, now: int, elections: list[tuple[str, str]]
    ) -> None:
        """A SYNC group left without a master (no member of its set was alive when its
        master fell silent) elects a member of the set once one is back, as its old master
        would be taken back: each holds every acknowledged send. An ASYNC group waits for
        its old master."""
        if not (group.sync and group.sync_set and group.epochs):
            return
        winner = elect_master(group, now, self.heartbeat_timeout_ms, self.max_gap_not_in_sync)
        if winner:
            log.warning("%s: %s of the sync state set is back", name, winner)
            self._open_epoch(name, group, winner, group.epoch + 1, NO_TRUNCATE)
            elections.append((name, winner))

    def elect(
        self, broker_name: str, broker_id: int | None = None, now_ms: int | None = None
    ) -> tuple[str, int]:
        """mqadmin's electMaster: the replica with controller id ``broker_id`` of
        ``broker_name`` becomes its master at a new epoch (None: the controller's own choice
        among the in-sync slaves, as when a master falls silent). Only a replica the
        automatic election could pick may be designated (a live slave at the group's epoch,
        of a SYNC group's sync state set, or within an ASYNC group's gap): it holds every
        acknowledged send. A live old master learns at its next heartbeat that it is a
        slave now and stops (restarted, it rejoins as one), as in RocketMQ 5. Returns the
        master's address and epoch (designating the master changes nothing);
        ``ValueError`` naming why no election happened."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            group = self._groups.get(broker_name)
            if group is None:
                raise ValueError(f"broker group {broker_name} is unknown to the controller")
            candidates = [
                addr
                for _, _, addr in electable(
                    group, now, self.heartbeat_timeout_ms, self.max_gap_not_in_sync
                )
            ]
            if broker_id is None:
                winner = elect_master(
                    group, now, self.heartbeat_timeout_ms, self.max_gap_not_in_sync
                )
                if not winner:
                    raise ValueError(f"{broker_name} has no slave in sync to elect")
            else:
                winner = next(
                    (a for a, r in group.replicas.items() if r.broker_id == broker_id), ""
                )
                if not winner:
                    raise ValueError(f"{broker_name} has no replica with broker id {broker_id}")
                if winner == group.master_addr:
                    return winner, group.epoch
                if winner not in candidates:
                    raise ValueError(
                        f"broker id {broker_id} ({winner}) of {broker_name} is not in sync "
                        "(a live slave at the group's epoch"
                        + (", of the sync state set)" if group.sync else ", within the gap)")
                    )
            log.warning("%s: %s elected by an admin request", broker_name, winner)
            self._open_epoch(broker_name, group, winner, group.epoch + 1, NO_TRUNCATE)
            return winner, group.epoch

    def clean(
        self,
        broker_name: str,
        broker_ids: set[int] | None,
        clean_living: bool = False,
        now_ms: int | None = None,
    ) -> list[str]:
        """mqadmin's cleanBrokerMetadata: forget the replicas of ``broker_name`` with these
        controller ids (None: the whole group). A replica heard from within the heartbeat
        timeout is forgotten only with ``clean_living`` (it registers again at its next
        heartbeat); the master of a group that keeps other replicas is never (elect another
        first). Returns the addresses forgotten; ``ValueError`` naming why nothing was."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            group = self._groups.get(broker_name)
            if group is None:
                raise ValueError(f"broker group {broker_name} is unknown to the controller")
            chosen = {
                addr: r
                for addr, r in group.replicas.items()
                if broker_ids is None or r.broker_id in broker_ids
            }
            if broker_ids is not None and len(chosen) < len(broker_ids):
                known = sorted(r.broker_id for r in group.replicas.values())
                raise ValueError(
                    f"{broker_name} has replicas {known}, not all of {sorted(broker_ids)}"
                )
            living = sorted(
                a for a, r in chosen.items() if r.last_seen_ms + self.heartbeat_timeout_ms >= now
            )
            if living and not clean_living:
                raise ValueError(
                    f"{', '.join(living)} of {broker_name} is alive (clean living brokers too "
                    "with -l)"
                )
            if broker_ids is None:
                del self._groups[broker_name]
            else:
                if group.master_addr in chosen and len(chosen) < len(group.replicas):
                    raise ValueError(
                        f"{group.master_addr} is the master of {broker_name}: elect another first"
                    )
                for addr in chosen:
                    del group.replicas[addr]
                group.sync_set -= chosen.keys()
            self._persist()
            log.warning("%s: forgot %s by an admin request", broker_name, ", ".join(sorted(chosen)))
            return sorted(chosen)

    def sync_state(self) -> dict[str, dict[str, object]]:
        """brokerName → master, epoch, epochs and replicas, for status displays and tests."""
        with self._lock:
            return {
                name: {
                    "masterAddr": g.master_addr,
                    "masterRole": g.master_role,
                    "alone": g.alone,
                    "syncStateSet": sorted(g.sync_set),
                    "epoch": g.epoch,
                    "epochs": [[e.epoch, e.start_offset, e.master_addr] for e in g.epochs],
                    "replicas": {a: vars(r).copy() for a, r in sorted(g.replicas.items())},
                }
                for name, g in sorted(self._groups.items())
            }


def electable(
    group: BrokerGroup, now_ms: int, timeout_ms: int, max_gap: int
) -> list[tuple[int, int, str]]:
    """The in-sync replicas as ``(max offset, -broker id, address)``: live slaves at the
    group's epoch (a SYNC group's: of its recorded sync state set; an ASYNC group's: no
    more than ``max_gap`` behind the master's last report)."""
    master = group.replicas.get(group.master_addr)
    master_offset = master.max_offset if master is not None else 0
    return [
        (r.max_offset, -r.broker_id, addr)
        for addr, r in group.replicas.items()
        if addr != group.master_addr
        and r.role == "SLAVE"
        and r.epoch == group.epoch
        and r.last_seen_ms + timeout_ms >= now_ms
        and (addr in group.sync_set if group.sync else master_offset - r.max_offset <= max_gap)
    ]


def elect_master(group: BrokerGroup, now_ms: int, timeout_ms: int, max_gap: int) -> str:
    """RocketMQ 5's ElectMaster from the in-sync replicas (``electable``): the highest max
    offset (then the lowest broker id) wins; "" if there is none, as when a SYNC group is
    alone."""
    candidates = electable(group, now_ms, timeout_ms, max_gap)
    return max(candidates)[2] if candidates else ""


_ADDRESS = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}):(\d{1,5})", re.ASCII)


def _check_address(addr: str) -> None:
    """An HA connection's address as ``ip:port`` (IPv4, as the HA table keeps them)."""
    match = _ADDRESS.fullmatch(addr)
    if (
        match is None
        or any(int(b) > 255 for b in match.groups()[:4])
        or not (0 < int(match[5]) < 65536)
    ):
        raise ValueError(f"{addr!r} is not an HA connection address (ip:port)")
