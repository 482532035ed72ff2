"""A broker's runtime numbers (GET_BROKER_RUNTIME_INFO, ``shmq status``): its role and
offsets from the shared counters, the messages consumers read (``msgs_out``: TCP pulls and
local consumers' reads, collected as the request is answered, so two requests give a rate),
each agent's process and heartbeat, its clients; and the RocketMQ keys of that answer's
``KVTable`` that ``mqadmin clusterList`` / ``brokerStatus`` read
(``rocketmq_runtime_table``)."""

from __future__ import annotations

import os
from typing import Any

from shmq import __version__
from shmq.broker.context import BrokerContext
from shmq.ipc import counters as cn


def broker_stats(ctx: BrokerContext) -> dict[str, Any]:
    words = ctx.counters.words
    ctx.gets.collect()
    agents = ctx.agents.processes()
    for kind, row in agents.items():
        row["restarts"] = cn.load(words, cn.agent_word(kind, cn.RESTARTS))
        row["heartbeat_ms"] = cn.load(words, cn.agent_word(kind, cn.HEARTBEAT_MS))
    cfg = ctx.config
    return {
        "broker": cfg.broker_name,
        "address": ctx.address,
        "pid": os.getpid(),
        "store": ctx.root,
        "flush_disk_type": cfg.store.flush_disk_type,
        "broker_role": cfg.broker_role,
        "broker_id": cfg.broker_id,
        "confirmed_offset": cn.load(words, cn.CONFIRMED_OFFSET),
        "ha_slaves": cn.load(words, cn.HA_SLAVES),
        "write_offset": cn.load(words, cn.WRITE_OFFSET),
        "dispatched_offset": cn.load(words, cn.DISPATCHED_OFFSET),
        "flushed_offset": cn.load(words, cn.FLUSHED_OFFSET),
        "msgs_in": cn.load(words, cn.MSGS_IN),
        "msgs_dispatched": cn.load(words, cn.MSGS_DISPATCHED),
        "msgs_out": ctx.gets.total(),
        "rejected": cn.load(words, cn.REJECTED),
        "flushes": cn.load(words, cn.FLUSHES),
        "flush_errors": cn.load(words, cn.FLUSH_ERRORS),
        "agents": agents,
        "clients": ctx.clients.stats(),
        "stop_reason": ctx.agents.stop_reason,
    }


def rocketmq_runtime_table(ctx: BrokerContext, stats: dict[str, Any]) -> dict[str, Any]:
    """RocketMQ 4.9's runtime info keys, from ``stats`` (``broker_stats``'s answer) and the
    broker's ``rates``: ``putTps`` and ``getTransferedTps`` over the last 10 s, minute and 10
    minutes, the day totals (gets are messages consumers read: ``stats.get_counts``). shmq
    has no send or pull thread-pool queues: their sizes and waits are 0."""
    started_ms = cn.load(ctx.counters.words, cn.STARTED_MS)
    rates = ctx.rates
    disk = os.statvfs(ctx.root)
    used = 1 - disk.f_bavail / disk.f_blocks if disk.f_blocks else 0.0
    return {
        "bootTimestamp": started_ms,
        "brokerVersionDesc": f"shmq {__version__}",
        "commitLogDiskRatio": used,
        "commitLogMaxOffset": stats["write_offset"],
        "dispatchBehindBytes": stats["write_offset"] - stats["dispatched_offset"],
        "getTransferedTps": rates.get_tps(),
        "msgGetTotalTodayMorning": rates.get_days.today_morning,
        "msgGetTotalTodayNow": stats["msgs_out"],
        "msgGetTotalYesterdayMorning": rates.get_days.yesterday_morning,
        "msgPutTotalTodayMorning": rates.put_days.today_morning,
        "msgPutTotalTodayNow": stats["msgs_in"],
        "msgPutTotalYesterdayMorning": rates.put_days.yesterday_morning,
        "pageCacheLockTimeMills": 0,
        "pullThreadPoolQueueHeadWaitTimeMills": 0,
        "pullThreadPoolQueueSize": 0,
        "putMessageFailedTimes": stats["rejected"],
        "putTps": rates.put_tps(),
        "sendThreadPoolQueueHeadWaitTimeMills": 0,
        "sendThreadPoolQueueSize": 0,
    }
