"""``ha-status``: the replication state a broker reports, from the counters and the HA
table its HA agent publishes (the control server never talks to the HA agent itself)."""

from __future__ import annotations

import time
from typing import Any

from shmq.broker.context import BrokerContext
from shmq.ipc import counters as cn
from shmq.ipc import ha_table as ht


def ha_status(ctx: BrokerContext) -> dict[str, Any]:
    """A master: each slave's address, acked offset and lag (bytes, and seconds since its
    ack last reached the master's write offset), in sync when the lag is under
    haSlaveFallbehindMax (a SYNC_MASTER in controller mode: whether its connection is in
    the sync state set, whose acks sends wait for), and whether it acknowledges sends
    without a slave (a SYNC_MASTER in controller mode that the controller recorded alone).
    A slave: its write offset and the master it follows."""
    cfg = ctx.config
    words = ctx.counters.words
    write = cn.load(words, cn.WRITE_OFFSET)
    out: dict[str, Any] = {
        "brokerName": cfg.broker_name,
        "brokerId": cfg.broker_id,
        "brokerRole": cfg.broker_role,
        "writeOffset": write,
    }
    if cfg.is_slave:
        out["masterHaAddress"] = cfg.ha_master_address or cn.unpack_address(
            cn.load(words, cn.MASTER_HA_ADDR)
        )
        return out
    now_ms = int(time.time() * 1000)
    table = ctx.ha_table.words
    _, mode, members = ht.read_set(table)
    slaves = []
    for addr, ack, caught_up_ms, connected_ms, conn_id in ht.read_rows(table):
        lag = max(0, write - ack) if ack >= 0 else write
        slave = {
            "address": cn.unpack_address(addr),
            "ackOffset": ack,
            "lagBytes": lag,
            "lagSeconds": round((now_ms - caught_up_ms) / 1000, 3) if lag else 0.0,
            "inSync": ack >= 0 and lag < cfg.ha_slave_fallbehind_max,
            "connectedMs": connected_ms,
        }
        if mode == ht.ALL_MEMBERS:  # sends wait for this slave's acks
            slave["inSyncStateSet"] = conn_id in members
        slaves.append(slave)
    out.update(
        haPort=cn.load(words, cn.HA_PORT),
        confirmedOffset=cn.load(words, cn.CONFIRMED_OFFSET),
        ackAlone=bool(cn.load(words, cn.ACK_ALONE)),
        slaves=slaves,
    )
    return out
