"""The message queries of ``Admin`` (RocketMQ's ``queryMsgById``, ``queryMsgByKey``,
``queryMsgByUniqueKey`` and by time) and a message consumed on request by a group member:
a mixin over the broker lookups and requests ``Admin`` provides (``_masters``,
``_topic_brokers``, ``_call``, ``_store_hosts``)."""

from __future__ import annotations

import time
from typing import Any

from shmq.errors import ClientError, InvalidMessageIdError, RemotingError, ResponseError
from shmq.message import parse_offset_msg_id
from shmq.remoting.protocol import RequestCode, ResponseCode

DEFAULT_QUERY_NUM = 64
CONSUME_DIRECTLY_TIMEOUT_S = 8.0  # the broker gives a consumer 5 s, then says so


class MessageQueries:
    """Messages by offset message id, key, unique key or store time; each found as the
    brokers' JSON (``message_to_json``'s shape)."""

    def _by_store_host(self, store_host: str) -> tuple[str, str] | None:
        """The broker whose messages carry ``store_host`` (its address, or the storeHost
        it reports)."""
        masters = self._masters()
        for name, addr in masters:
            if addr == store_host:
                return name, addr
        for name, addr in masters:
            if addr not in self._store_hosts:
                try:
                    info = self._call((name, addr), RequestCode.GET_STORE_INFO)[1]
                except RemotingError:
                    continue
                self._store_hosts[addr] = info.get("storeHost", "")
            if self._store_hosts[addr] == store_host:
                return name, addr
        return None

    def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> dict[str, Any]:
        """The message with offset message id ``msg_id`` (store host + CommitLog offset),
        read from the broker at that store host. When ``msg_id`` is a unique key (the
        client's msg id) instead, give ``topic``: it is then looked up as one, as mqadmin
        does."""
        try:
            host, offset = parse_offset_msg_id(msg_id)
        except InvalidMessageIdError:
            if topic is None:
                raise
            return self.query_msg_by_unique_key(topic, msg_id)
        target = self._by_store_host(host)
        if target is not None:
            try:
                return self._call(target, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})[1]
            except ResponseError:
                if topic is None:
                    raise
        if topic is not None:
            return self.query_msg_by_unique_key(topic, msg_id)
        raise ClientError(
            f"message id {msg_id}: no broker stores messages at {host} (offset {offset});"
            " if it is a unique key (client msg id), give its topic"
        )

    def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Have member ``client_id`` of ``group`` consume the message ``msg_id`` (as
        ``query_msg_by_id`` finds it) with its listener now (``mqadmin queryMsgById -g -d``,
        RocketMQ's ``consumeMessageDirectly``): its ``ConsumeMessageDirectlyResult``
        (``order``, ``autoCommit``, ``consumeResult``, ``remark``, ``spentTimeMills``).
        Offsets do not move. ``ResponseError``: SYSTEM_ERROR when the member is not online
        at the message's broker or not a push consumer of the group, CONSUME_MSG_TIMEOUT
        when its listener takes longer than the broker waits."""
        msg = self.query_msg_by_id(msg_id, topic)
        offset_id = msg["offsetMsgId"]
        target = self._by_store_host(parse_offset_msg_id(offset_id)[0])
        if target is None:
            raise ClientError(f"message {offset_id}: no broker stores it any more")
        fields = {"consumerGroup": group, "clientId": client_id, "msgId": offset_id,
                  "topic": msg["topic"]}  # fmt: skip
        return self._call(target, RequestCode.CONSUME_MESSAGE_DIRECTLY, fields,
                          timeout=CONSUME_DIRECTLY_TIMEOUT_S)[1]  # fmt: skip

    def _query_index(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list:
        found = []
        fields_ = {
            "topic": topic,
            "key": key,
            "maxNum": max_num,
            "beginTimestamp": begin,
            "endTimestamp": end,
        }
        for target in self._topic_brokers(topic):
            try:
                found += self._call(target, RequestCode.QUERY_MESSAGE, fields_)[1]["messages"]
            except ResponseError as exc:
                if exc.code != ResponseCode.QUERY_NOT_FOUND:
                    raise
        return sorted(found, key=_store_order)

    def query_msg_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_QUERY_NUM,
        begin: int = 0,
        end: int | None = None,
    ) -> list[dict[str, Any]]:
        """The newest ``max_num`` messages of ``topic`` with ``key`` among their keys,
        stored in ``[begin, end]`` ms (end: now), oldest first; [] when none."""
        end = _now_ms() + 1000 if end is None else end
        found = [
            m
            for m in self._query_index(topic, key, max_num, begin, end)
            if key in m["keys"] and begin <= m["storeTimestamp"] <= end  # the index has seconds
        ]
        return found[-max_num:]

    def query_msg_by_unique_key(self, topic: str, msg_id: str) -> dict[str, Any]:
        """The message of ``topic`` whose unique key (``UNIQ_KEY``, the msg id a producer's
        ``send`` returns) is ``msg_id``; the first stored when it was stored again."""
        found = [
            m
            for m in self._query_index(topic, msg_id, 32, 0, _now_ms() + 1000)
            if m["properties"].get("UNIQ_KEY") == msg_id
        ]
        if not found:
            raise ClientError(f"no message of topic {topic} has the unique key {msg_id}")
        return found[0]

    def query_msg_by_time(
        self, topic: str, begin: int, end: int | None = None, max_num: int = DEFAULT_QUERY_NUM
    ) -> list[dict[str, Any]]:
        """The first ``max_num`` messages of ``topic`` stored in ``[begin, end]`` ms (end:
        now), by store time."""
        end = _now_ms() + 1000 if end is None else end
        fields_ = {"topic": topic, "beginTimestamp": begin, "endTimestamp": end, "maxNum": max_num}
        found = []
        for target in self._topic_brokers(topic):
            found += self._call(target, RequestCode.QUERY_MESSAGE_BY_TIME, fields_)[1]["messages"]
        return sorted(found, key=_store_order)[:max_num]


def _store_order(msg: dict[str, Any]) -> tuple[int, str, int]:
    return msg["storeTimestamp"], msg.get("storeHost", ""), msg["commitLogOffset"]


def _now_ms() -> int:
    return int(time.time() * 1000)
