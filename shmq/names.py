"""RocketMQ's rule for topic and group names, in one place (no heavy imports: the control
plane and the NameServer check every name a request carries with it, because a name builds
file paths and persisted tables)."""

from __future__ import annotations

import re

NAME_CHARS = r"[%|a-zA-Z0-9_-]"
MAX_TOPIC_LENGTH = 127  # TopicValidator.TOPIC_MAX_LENGTH
MAX_GROUP_LENGTH = 255  # Validators.CHARACTER_MAX_LENGTH
_NAME_RE = re.compile(NAME_CHARS + "+")


def name_problem(kind: str, name: object, limit: int) -> str | None:
    """Why ``name`` is not a valid ``kind`` ("topic", "group") name, or None when it is."""
    if not isinstance(name, str):
        return f"{kind} must be a str, not {type(name).__name__}"
    if _NAME_RE.fullmatch(name) and len(name) <= limit:
        return None
    shown = name if len(name) <= 140 else name[:137] + "..."
    return (
        f"{kind} {shown!r} is invalid: it must match ^{NAME_CHARS}{{1,{limit}}}$ "
        f"(length {len(name)}, at most {limit})"
    )


# A consumer group's retry and dead-letter topics (RocketMQ's ``MixAll``)
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def reply_topic(cluster: str) -> str:
    """The topic a cluster's replies to requests go to (``MixAll.getReplyTopic``); every
    broker of the cluster has it, with one queue."""
    return cluster + "_REPLY_TOPIC"


# The broker's system topics: delayed and timer messages wait in the first two, transactions
# use the next three
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC = "rmq_sys_wheel_timer"
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
# shmq's own: the writer appends a record here when a topic is deleted (its body is the
# topic's name), so every reput (the master's, a slave's, recovery's) purges that topic's
# consume queues at the same place in the CommitLog. Only the writer writes it: no topic
# config may name it, so no producer's record can reach it.
DELETED_TOPIC_LOG = "rmq_sys_SHMQ_DELETED_TOPIC"

# TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET (4.9, and 5.x's timer topic): no client sends
# to these (shmq's producers place delayed and half messages there themselves, as the
# broker would, after checking the topic the user named)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        HALF_TOPIC,
        OP_TOPIC,
        CHECK_MAX_TIME_TOPIC,
        DELETED_TOPIC_LOG,
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)

# TopicValidator's system topic set (4.9, 5.x's timer topic, and shmq's deletion log); a
# broker adds its cluster and broker names, as RocketMQ's TopicConfigManager does
SYSTEM_TOPICS = frozenset(
    {
        "TBW102",
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        "BenchmarkTest",
        HALF_TOPIC,
        "RMQ_SYS_TRACE_TOPIC",
        OP_TOPIC,
        CHECK_MAX_TIME_TOPIC,
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        DELETED_TOPIC_LOG,
    }
)
SYSTEM_TOPIC_PREFIX = "rmq_sys_"  # 5.x: every such topic is a system topic too


def is_system_topic(topic: str) -> bool:
    """RocketMQ 5's ``TopicValidator.isSystemTopic`` (without a broker's own names)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def system_topic_refusal(topic: str) -> str:
    """RocketMQ 5's answer to deleting or creating a system topic."""
    return f"The topic[{topic}] is conflict with system topic."


# the NameServer KV namespace of ordered topics' queue lists (RocketMQ's NamesrvUtil)
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
