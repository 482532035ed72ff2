"""A consumer's subscription to one topic (RocketMQ's ``SubscriptionData``).

The expression is ``*`` (everything) or ``TagA || TagB``. The consume queue keeps each
message's tag hash, so the reader skips other tags without touching the CommitLog; since two
tags can share a hash, the client then compares the tag strings too. A SQL92 selector
(``MessageSelector.by_sql``) has no tag hashes: the reader evaluates its compiled filter on
each message's properties (or, over TCP, the broker does), so ``filter`` passes those through.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from shmq.client.selector import SQL92, TAG, MessageSelector
from shmq.codec import java_hash
from shmq.errors import InvalidMessageError
from shmq.message import MessageExt, validate_topic
from shmq.store.results import parse_tag_filter


@dataclass(frozen=True)
class Subscription:
    topic: str
    expression: str = "*"
    codes: np.ndarray | None = field(default=None, compare=False, repr=False)
    tags: frozenset[str] | None = None
    version: int = 0
    selector: MessageSelector | None = None  # a SQL92 selector; None for tags

    @classmethod
    def parse(cls, topic: str, expression: str | MessageSelector | None = "*") -> Subscription:
        validate_topic(topic)
        if isinstance(expression, MessageSelector):
            if expression.is_sql:
                version = time.time_ns() // 1_000_000
                return cls(topic, expression.expression, None, None, version, expression)
            expression = expression.expression
        if expression is not None and not isinstance(expression, str):
            raise InvalidMessageError(f"tag expression {expression!r} is not a string")
        expression = "*" if expression is None or not expression.strip() else expression.strip()
        codes = parse_tag_filter(expression)
        tags = None
        if codes is not None:
            tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
        return cls(topic, expression, codes, tags, time.time_ns() // 1_000_000)

    @property
    def expression_type(self) -> str:
        return TAG if self.selector is None else SQL92

    @property
    def pull_expression(self) -> str | MessageSelector:
        """What the reader's ``pull`` takes: the tag expression, or the SQL92 selector."""
        return self.expression if self.selector is None else self.selector

    def filter(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """``msgs`` whose tag is in the expression: the client-side string check after the
        consume queue's hash filter (the list itself when the expression is ``*``)."""
        if self.tags is None:
            return msgs
        return [m for m in msgs if m.tags in self.tags]

    def to_json(self) -> dict:
        """As the broker's consumer registry shows it (``SubscriptionData``)."""
        tags = sorted(self.tags) if self.tags is not None else []
        return {
            "topic": self.topic,
            "subString": self.expression,
            "tagsSet": tags,
            "codeSet": [java_hash(t) for t in tags],
            "subVersion": self.version,
            "classFilterMode": False,
            "expressionType": self.expression_type,
        }
