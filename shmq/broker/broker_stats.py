"""A broker's runtime numbers (GET_BROKER_RUNTIME_INFO, ``shmq status``): its role and
offsets from the shared counters, each agent's process and heartbeat, its clients."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from shmq.ipc import counters as cn

if TYPE_CHECKING:
    from shmq.broker.supervisor import Broker


def broker_stats(broker: Broker, procs: dict[str, Any]) -> dict[str, Any]:
    words = broker.counters.words
    agents = {}
    for kind in broker.agents:
        proc = procs.get(kind)
        agents[kind] = {
            "pid": proc.pid if proc is not None else None,
            "alive": bool(proc is not None and proc.is_alive()),
            "restarts": cn.load(words, cn.agent_word(kind, cn.RESTARTS)),
            "heartbeat_ms": cn.load(words, cn.agent_word(kind, cn.HEARTBEAT_MS)),
        }
    return {
        "broker": broker.config.broker_name,
        "address": broker.address,
        "pid": os.getpid(),
        "store": broker.root,
        "flush_disk_type": broker.config.store.flush_disk_type,
        "broker_role": broker.config.broker_role,
        "broker_id": broker.config.broker_id,
        "confirmed_offset": cn.load(words, cn.CONFIRMED_OFFSET),
        "ha_slaves": cn.load(words, cn.HA_SLAVES),
        "write_offset": cn.load(words, cn.WRITE_OFFSET),
        "dispatched_offset": cn.load(words, cn.DISPATCHED_OFFSET),
        "flushed_offset": cn.load(words, cn.FLUSHED_OFFSET),
        "msgs_in": cn.load(words, cn.MSGS_IN),
        "msgs_dispatched": cn.load(words, cn.MSGS_DISPATCHED),
        "rejected": cn.load(words, cn.REJECTED),
        "flushes": cn.load(words, cn.FLUSHES),
        "flush_errors": cn.load(words, cn.FLUSH_ERRORS),
        "agents": agents,
        "clients": broker.clients.stats(),
        "stop_reason": broker.stop_reason,
    }
