"""Subscription groups (RocketMQ's ``SubscriptionGroupConfig``) as mqadmin's
``updateSubGroup``, ``examineSubGroup`` and ``deleteSubGroup`` see them: each broker keeps
its own, so a change goes to one broker or every master of a cluster. ``Admin`` documents
each call."""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Broker, Remote
from shmq.client.admin.topics import Topics
from shmq.errors import ConfigError, NoRouteError, ResponseError
from shmq.names import dlq_topic, retry_topic
from shmq.remoting.protocol import RequestCode, ResponseCode

# update_sub_group's settings → RocketMQ's SubscriptionGroupConfig JSON keys.
SUB_GROUP_SETTINGS = {
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "consume_message_orderly": "consumeMessageOrderly",
}


class SubscriptionGroups:
    """Subscription group configs on the brokers; ``topics`` deletes a deleted group's
    retry and dead-letter topics."""

    def __init__(self, remote: Remote, topics: Topics) -> None:
        self._remote = remote
        self._topics = topics

    def _sub_groups(self, target: Broker) -> dict[str, dict[str, Any]]:
        body = self._remote.call(target, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)[1]
        return body.get("subscriptionGroupTable", {})

    def update_sub_group(
        self,
        group: str,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        **settings: Any,
    ) -> dict[str, dict[str, Any]]:
        unknown = sorted(set(settings) - set(SUB_GROUP_SETTINGS))
        if unknown:
            raise ConfigError(
                f"unknown subscription group setting(s) {', '.join(unknown)};"
                f" known: {', '.join(SUB_GROUP_SETTINGS)}"
            )
        changes = {SUB_GROUP_SETTINGS[k]: v for k, v in settings.items() if v is not None}
        out = {}
        for target in self._remote.targets(broker, cluster):
            config = {**self._sub_groups(target).get(group, {"groupName": group}), **changes}
            self._remote.call(target, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config)
            out[target[0]] = self._sub_groups(target).get(group, config)
        return out

    def examine_sub_group(
        self, group: str, *, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, Any]]:
        out = {}
        for target in self._remote.targets(broker, cluster):
            config = self._sub_groups(target).get(group)
            if config is not None:
                out[target[0]] = config
        if not out:
            raise ResponseError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group {group} does not exist",
            )
        return out

    def delete_sub_group(
        self,
        group: str,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        deleted = []
        fields = {"groupName": group, "removeOffset": remove_offset}
        for target in self._remote.targets(broker, cluster):
            try:
                self._remote.call(target, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)
                deleted.append(target[0])
            except ResponseError as exc:
                if exc.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                    raise
        if not deleted:
            raise ResponseError(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group {group} does not exist",
            )
        if broker is None:
            for topic in (retry_topic(group), dlq_topic(group)):
                try:
                    self._topics.delete_topic(topic, cluster)
                except NoRouteError:
                    continue  # no broker has it
                except ResponseError as exc:
                    if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                        raise
        return deleted
