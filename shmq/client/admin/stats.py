"""A broker's put and get statistics, the part of ``Admin`` behind mqadmin
``viewBrokerStatsData`` and ``statsAll``: VIEW_BROKER_STATS_DATA's minute, hour and day
windows (``shmq.broker.stats.items``), per topic and per topic and group. A mixin over
``Admin``'s ``_call``, ``_broker``, ``_topic_brokers``, ``topic_list``,
``topic_consume_by_who`` and ``consumer_progress``."""

from __future__ import annotations

from typing import Any

from shmq.errors import ClientError, NoRouteError, ResponseError
from shmq.remoting.admin_bodies import GROUP_GET_NUMS, STATS_WINDOWS, TOPIC_PUT_NUMS
from shmq.remoting.protocol import RequestCode, ResponseCode


class BrokerStats:
    """Put and get statistics (needs ``Admin``'s helpers)."""

    _call: Any
    _broker: Any
    _topic_brokers: Any
    topic_list: Any
    topic_consume_by_who: Any
    consumer_progress: Any

    def broker_stats_data(self, broker: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """One statistic of ``broker`` (a name or an address), RocketMQ's
        ``BrokerStatsData``: ``{"statsMinute" | "statsHour" | "statsDay": {"sum", "tps",
        "avgpt"}}``. ``stats_name``: ``TOPIC_PUT_NUMS`` (key: a topic), ``GROUP_GET_NUMS``
        (key: ``topic@group``), ``BROKER_PUT_NUMS`` or ``BROKER_GET_NUMS`` (key: the
        cluster). A ``ResponseError`` when the broker has not counted it since it started."""
        fields_ = {"statsName": stats_name, "statsKey": stats_key}
        return self._call(self._broker(broker), RequestCode.VIEW_BROKER_STATS_DATA, fields_)[1]

    def stats_all(self, topic: str | None = None, active_only: bool = False) -> list[dict]:
        """mqadmin ``statsAll``: per topic (``topic`` alone when given) and group consuming
        it, the lag, the topic's put and the group's get rates over the last minute
        (``in_tps``, ``out_tps``), summed over the topic's brokers, and their counts over
        the last day (``in_msgs_24h``, ``out_msgs_24h``; the last hour's or minute's while
        the broker has run shorter). A topic nobody consumes has one row with
        ``group`` None. ``active_only``: rows with messages put or got that day only."""
        rows = []
        for name in [topic] if topic is not None else self.topic_list():
            try:
                targets = self._topic_brokers(name)
            except NoRouteError:
                if topic is not None:
                    raise
                continue  # deleted since the list was read
            in_tps, in_day = self._summed(targets, TOPIC_PUT_NUMS, name)
            groups = self.topic_consume_by_who(name)
            if not groups and (not active_only or in_day):
                rows.append(_row(name, None, 0, in_tps, 0.0, in_day, 0))
            for group in groups:
                out_tps, out_day = self._summed(targets, GROUP_GET_NUMS, f"{name}@{group}")
                if not active_only or in_day or out_day:
                    rows.append(_row(name, group, self._lag(group, name), in_tps, out_tps,
                                     in_day, out_day))  # fmt: skip
        return rows

    def _summed(self, targets: list[tuple[str, str]], stats_name: str, key: str):
        """The minute's tps and the day's count of one statistic over ``targets`` (a broker
        that has not counted it adds nothing, as in mqadmin)."""
        tps, day = 0.0, 0
        for target in targets:
            fields_ = {"statsName": stats_name, "statsKey": key}
            try:
                data = self._call(target, RequestCode.VIEW_BROKER_STATS_DATA, fields_)[1]
            except ResponseError as exc:
                if exc.code != ResponseCode.SYSTEM_ERROR:
                    raise
                continue
            tps += float(data["statsMinute"]["tps"])
            day += next((int(data[w]["sum"]) for w in reversed(STATS_WINDOWS) if data[w]["sum"]), 0)
        return tps, day

    def _lag(self, group: str, topic: str) -> int:
        try:
            return max(self.consumer_progress(group, topic).diff_total, 0)
        except ClientError:  # no offsets committed yet
            return 0


def _row(
    topic: str, group: str | None, lag: int, in_tps: float, out_tps: float, in_day: int,
    out_day: int,
) -> dict[str, Any]:  # fmt: skip
    return {"topic": topic, "group": group, "accumulation": lag, "in_tps": in_tps,
            "out_tps": out_tps, "in_msgs_24h": in_day, "out_msgs_24h": out_day}  # fmt: skip
