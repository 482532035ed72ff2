"""The admin bodies whose RocketMQ shapes are not plain JSON, written and read in one place.

RocketMQ 4.9 keys ``TopicStatsTable`` and ``ConsumeStats`` by ``MessageQueue``, and fastjson
writes such a key as an object (``shmq.remoting.fastjson``)::

    GET_TOPIC_STATS_INFO  {"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:
                              {"lastUpdateTimestamp":ms,"maxOffset":n,"minOffset":n}}}
    GET_CONSUME_STATS     {"consumeTps":0.0,"offsetTable":{{...MessageQueue...}:
                              {"brokerOffset":n,"consumerOffset":n,"lastTimestamp":ms}}}
    ResetOffsetBody       {"offsetTable":{{...MessageQueue...}:n}}
                          (INVOKE_BROKER_TO_RESET_OFFSET, RESET_CONSUMER_CLIENT_OFFSET)

``GET_BROKER_RUNTIME_INFO`` is a ``KVTable``, ``{"table":{"putTps":"0.00 0.00 0.00",...}}``
with text values only. The broker puts the keys ``mqadmin clusterList`` and ``brokerStatus``
read, and shmq's own runtime numbers as one JSON text under ``RUNTIME_KEY``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from shmq.remoting import fastjson

RUNTIME_KEY = "shmqRuntimeInfo"
# VIEW_BROKER_STATS_DATA: the stats names shmq counts and BrokerStatsData's windows
TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
STATS_WINDOWS = ("statsMinute", "statsHour", "statsDay")


def queue_key(topic: str, broker_name: str, queue_id: int) -> fastjson.ObjectKey:
    """A ``MessageQueue`` map key as fastjson writes it (getters in alphabetical order)."""
    return fastjson.ObjectKey.of({"brokerName": broker_name, "queueId": queue_id, "topic": topic})


def queue_table(rows: Iterable[tuple[str, str, int, Any]]) -> dict[Any, Any]:
    """``{MessageQueue: value}`` from ``(topic, broker name, queue id, value)`` rows."""
    return {queue_key(topic, broker, qid): value for topic, broker, qid, value in rows}


def queue_items(table: Mapping[Any, Any]) -> list[tuple[str, str, int, Any]]:
    """A ``Map<MessageQueue, X>`` read back: ``(topic, broker name, queue id, value)``."""
    out = []
    for key, value in table.items():
        if not isinstance(key, fastjson.ObjectKey):
            raise ValueError(f"a MessageQueue map key is an object, not {key!r}")
        mq = key.as_dict()
        out.append((str(mq["topic"]), str(mq["brokerName"]), int(mq["queueId"]), value))
    return out


def queue_entries(table: Mapping[Any, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A ``Map<MessageQueue, X>`` whose values are objects, read back: one dict per queue
    with ``topic``, ``brokerName``, ``queueId`` and the value's fields."""
    return [
        {"topic": topic, "brokerName": broker, "queueId": qid, **value}
        for topic, broker, qid, value in queue_items(table)
    ]


def kv_table(table: Mapping[str, Any], runtime: Mapping[str, Any]) -> dict[str, Any]:
    """A ``KVTable`` body: ``table``'s values as text, ``runtime`` as JSON text under
    ``RUNTIME_KEY``."""
    out = {key: str(value) for key, value in table.items()}
    out[RUNTIME_KEY] = json.dumps(runtime, separators=(",", ":"))
    return {"table": out}


def runtime_stats(body: Mapping[str, Any]) -> dict[str, Any]:
    """shmq's runtime numbers from a GET_BROKER_RUNTIME_INFO ``KVTable`` body, with
    RocketMQ's ``putTps`` and ``getTransferedTps`` as ``put_tps`` / ``get_tps`` (msgs/s over
    the last 10 s, minute and 10 minutes)."""
    try:
        table = body["table"]
        stats = json.loads(table[RUNTIME_KEY])
        for key, name in (("putTps", "put_tps"), ("getTransferedTps", "get_tps")):
            if key in table:
                stats[name] = [float(x) for x in table[key].split()]
        return stats
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a broker runtime info KVTable without a valid {RUNTIME_KEY}") from exc
