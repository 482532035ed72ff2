"""A broker's put and get statistics, as mqadmin's ``viewBrokerStatsData`` and ``statsAll``
see them: VIEW_BROKER_STATS_DATA's minute, hour and day windows
(``shmq.broker.stats.items``), per topic and per topic and group, with each group's lag.
``Admin`` documents each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.offsets import GroupOffsets
from shmq.client.admin.remote import Broker, Remote
from shmq.client.admin.topics import Topics
from shmq.errors import ClientError, NoRouteError, ResponseError
from shmq.remoting.admin_bodies import GROUP_GET_NUMS, STATS_WINDOWS, TOPIC_PUT_NUMS
from shmq.remoting.protocol import RequestCode, ResponseCode


class BrokerStats:
    """Put and get statistics; ``topics`` lists the topics and their groups, ``offsets``
    gives each group's lag."""

    def __init__(self, remote: Remote, topics: Topics, offsets: GroupOffsets) -> None:
        self._remote = remote
        self._topics = topics
        self._offsets = offsets

    def broker_stats_data(self, broker: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        fields = {"statsName": stats_name, "statsKey": stats_key}
        target = self._remote.broker(broker)
        return self._remote.call(target, RequestCode.VIEW_BROKER_STATS_DATA, fields)[1]

    def stats_all(self, topic: str | None = None, active_only: bool = False) -> list[dict]:
        rows = []
        for name in [topic] if topic is not None else self._topics.topic_list():
            try:
                targets = self._remote.topic_brokers(name)
            except NoRouteError:
                if topic is not None:
                    raise
                continue  # deleted since the list was read
            in_tps, in_day = self._summed(targets, TOPIC_PUT_NUMS, name)
            groups = self._topics.topic_consume_by_who(name)
            if not groups and (not active_only or in_day):
                rows.append(_row(name, None, 0, in_tps, 0.0, in_day, 0))
            for group in groups:
                out_tps, out_day = self._summed(targets, GROUP_GET_NUMS, f"{name}@{group}")
                if not active_only or in_day or out_day:
                    rows.append(_row(name, group, self._lag(group, name), in_tps, out_tps,
                                     in_day, out_day))  # fmt: skip
        return rows

    def _summed(self, targets: list[Broker], stats_name: str, key: str) -> tuple[float, int]:
        """The minute's tps and the day's count of one statistic over ``targets`` (a broker
        that has not counted it adds nothing, as in mqadmin)."""
        tps, day = 0.0, 0
        for target in targets:
            fields = {"statsName": stats_name, "statsKey": key}
            try:
                data = self._remote.call(target, RequestCode.VIEW_BROKER_STATS_DATA, fields)[1]
            except ResponseError as exc:
                if exc.code != ResponseCode.SYSTEM_ERROR:
                    raise
                continue
            tps += float(data["statsMinute"]["tps"])
            day += next((int(data[w]["sum"]) for w in reversed(STATS_WINDOWS) if data[w]["sum"]), 0)
        return tps, day

    def _lag(self, group: str, topic: str) -> int:
        try:
            return max(self._offsets.consumer_progress(group, topic).diff_total, 0)
        except ClientError:  # no offsets committed yet
            return 0


def _row(
    topic: str, group: str | None, lag: int, in_tps: float, out_tps: float, in_day: int,
    out_day: int,
) -> dict[str, Any]:  # fmt: skip
    return {"topic": topic, "group": group, "accumulation": lag, "in_tps": in_tps,
            "out_tps": out_tps, "in_msgs_24h": in_day, "out_msgs_24h": out_day}  # fmt: skip
