"""A broker in controller mode (``enableControllerMode``): its role comes from the
namesrv's controller (``shmq.namesrv.controller``), not from ``brokerRole``.

- At start, after recovery and before serving, the broker reports its epoch and CommitLog
  end (CONTROLLER_REGISTER_BROKER) and takes the role it is answered. A broker told to be a
  slave while it holds data of an epoch another master ended first truncates its store to
  where the next epoch starts, then follows the master as a slave.
- Every heartbeat (REGISTER_BROKER, each ``brokerHeartbeatInterval``) carries the same
  report; the answer may promote a slave (the supervisor restarts its agents as a master's)
  or tell a master or slave that its data diverged, which stops the broker: the next start
  truncates and rejoins.

The broker's epoch is kept in ``epochFileCheckpoint`` in the store root (RocketMQ 5's file
name; here JSON ``{"epoch": N, "startOffset": S}``): the last epoch whose data the store
holds, and where it started when this broker was its master. Written atomically, after the
data it describes is in place.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass

from shmq.broker.config.broker_config import BrokerConfig
from shmq.errors import ShmqError
from shmq.json_file import persist
from shmq.remoting.client import RemotingClient
from shmq.remoting.codes import RequestCode

log = logging.getLogger(__name__)

EPOCH_FILE = "epochFileCheckpoint"
ASK_TIMEOUT_S = 60.0  # how long a starting broker keeps asking the controller
ASK_RETRY_S = 0.5
PROMOTED_ROLE = "ASYNC_MASTER"  # a promoted slave whose group's master role is unknown


@dataclass(frozen=True)
class Epoch:
    epoch: int = 0
    start_offset: int = -1


@dataclass(frozen=True)
class Decision:
    """The controller's answer (``RoleDecision.to_ext``'s fields)."""

    role: str
    broker_id: int
    epoch: int
    master_addr: str
    truncate_offset: int
    master_role: str = ""  # the role the group's masters run ("" while unknown)
    alone: bool = False  # the controller recorded that no slave is in sync with the master

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Decision | None:
        """None when the answer carries no decision (a namesrv without a controller)."""
        if "controllerRole" not in ext:
            return None
        try:
            return cls(
                ext["controllerRole"],
                int(ext["controllerBrokerId"]),
                int(ext["controllerEpoch"]),
                ext.get("controllerMasterAddr", ""),
                int(ext.get("truncateOffset", "-1")),
                ext.get("controllerMasterRole", ""),
                ext.get("controllerAlone", "false") == "true",
            )
        except (KeyError, ValueError) as exc:
            raise ShmqError(f"the controller's answer {ext!r} is malformed: {exc}") from None


def load_epoch(root: str) -> Epoch:
    try:
        with open(os.path.join(root, EPOCH_FILE)) as f:
            data = json.load(f)
        return Epoch(int(data["epoch"]), int(data["startOffset"]))
    except FileNotFoundError:
        return Epoch()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ShmqError(f"{os.path.join(root, EPOCH_FILE)} is unreadable: {exc}") from None


def save_epoch(root: str, epoch: Epoch) -> None:
    text = json.dumps({"epoch": epoch.epoch, "startOffset": epoch.start_offset})
    persist(os.path.join(root, EPOCH_FILE), text)


def report(
    cfg: BrokerConfig,
    epoch: Epoch,
    max_offset: int,
    sync_state_set: tuple[str, ...] = (),
    ha_client_addr: str = "",
) -> dict[str, object]:
    """The controller fields of a heartbeat (shared by REGISTER_BROKER and the start): a
    SYNC_MASTER also reports the HA addresses of its sync state set (``sync_state``), a
    slave the address of its HA connection, by which the controller knows it in them."""
    fields: dict[str, object] = {
        "brokerRole": cfg.broker_role,
        "epoch": epoch.epoch,
        "maxOffset": max_offset,
    }
    if not cfg.is_slave and epoch.start_offset >= 0:
        fields["epochStartOffset"] = epoch.start_offset
    if cfg.broker_role == "SYNC_MASTER":
        fields["syncStateSet"] = ",".join(sync_state_set)
    if cfg.is_slave:
        fields["haClientAddr"] = ha_client_addr
    return fields


def ask_role(cfg: BrokerConfig, epoch: Epoch, max_offset: int) -> Decision:
    """Ask the namesrvs' controller until one answers (at most ``ASK_TIMEOUT_S``)."""
    fields = {
        "brokerName": cfg.broker_name,
        "brokerAddr": f"{cfg.broker_ip1}:{cfg.listen_port}",
        "clusterName": cfg.broker_cluster_name,
        "brokerId": cfg.broker_id,
        **report(cfg, epoch, max_offset),
    }
    deadline = time.monotonic() + ASK_TIMEOUT_S
    problem = "no namesrv configured"
    with RemotingClient(tls=cfg.tls_client) as client:
        while time.monotonic() < deadline:
            for addr in cfg.namesrv_addrs:
                try:
                    response, _ = client.invoke_json(
                        addr, RequestCode.CONTROLLER_REGISTER_BROKER, fields
                    )
                except ShmqError as exc:
                    problem = f"{addr}: {exc}"
                    continue
                decision = Decision.from_ext(response.ext_fields)
                if decision is not None:
                    return decision
            log.info("waiting for the controller: %s", problem)
            time.sleep(ASK_RETRY_S)
    raise ShmqError(
        f"enableControllerMode: no controller answered in {ASK_TIMEOUT_S} s ({problem})"
    )


def config_for(cfg: BrokerConfig, decision: Decision) -> BrokerConfig:
    """The configuration of the role the controller decided (a promoted slave runs the role
    of the group's masters: a SYNC group stays SYNC)."""
    if decision.role == "MASTER":
        role = cfg.broker_role
        if cfg.is_slave:
            promoted = decision.master_role
            role = promoted if promoted in ("ASYNC_MASTER", "SYNC_MASTER") else PROMOTED_ROLE
        return cfg.replace(broker_role=role, broker_id=0, ha_master_address="")
    return cfg.replace(broker_role="SLAVE", broker_id=decision.broker_id, ha_master_address="")


def start_role(cfg: BrokerConfig, store) -> tuple[BrokerConfig, Decision]:  # store: recovered
    """At start: ask the controller, truncate what a later epoch replaced, record the
    epoch; the configuration to run with, and the decision."""
    root = cfg.store.store_path_root_dir
    epoch = load_epoch(root)
    max_offset = store.commitlog.max_offset
    decision = ask_role(cfg, epoch, max_offset)
    log.info("controller: %s at epoch %d (master %s)", decision.role, decision.epoch,
             decision.master_addr or "none yet")  # fmt: skip
    if decision.role == "SLAVE" and 0 <= decision.truncate_offset < max_offset:
        store.truncate_to(decision.truncate_offset)
    if decision.role == "MASTER":
        if decision.epoch != epoch.epoch:  # bootstrapped an epoch: it starts at our end
            save_epoch(root, Epoch(decision.epoch, max_offset))
    elif decision.epoch > epoch.epoch:
        save_epoch(root, Epoch(decision.epoch, -1))
    return config_for(cfg, decision), decision


def follow(
    cfg: BrokerConfig, epoch: Epoch, write_offset: int, decision: Decision
) -> tuple[str, Epoch]:
    """A running broker's answer to the controller's decision other than a promotion: why
    it must stop ("" if not), and the epoch it is in then. A master the controller replaced
    stops; so does a slave holding data past where the new epoch starts (its next start
    truncates it and rejoins); any other slave adopts the new epoch (saved in its store)."""
    if decision.role != "SLAVE":
        return "", epoch
    if not cfg.is_slave:
        return (
            f"the controller made {decision.master_addr} master at epoch {decision.epoch};"
            " restart to rejoin as its slave"
        ), epoch
    if decision.epoch <= epoch.epoch:
        return "", epoch
    if 0 <= decision.truncate_offset < write_offset:
        return (
            f"this slave holds data past {decision.truncate_offset}, where epoch "
            f"{decision.epoch} starts; restart to truncate it and rejoin"
        ), epoch
    adopted = Epoch(decision.epoch)
    save_epoch(cfg.store.store_path_root_dir, adopted)
    return "", adopted
