"""What a consumer selects from a topic: RocketMQ's ``MessageSelector``.

``MessageSelector.by_tag("A || B")`` is the tag expression a plain string already is;
``MessageSelector.by_sql("a > 5 AND region IN ('eu', 'us')")`` is a SQL92 property filter
(``shmq.filter.sql92``), compiled here once, so a bad expression fails at ``subscribe`` with
its position and reason rather than at the first pull. A SQL92 subscription needs a broker
with ``enablePropertyFilter=true``, as in RocketMQ.

Example::

    consumer.subscribe("Orders", shmq.MessageSelector.by_sql("amount > 100"))
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shmq.filter.sql92 import SqlFilter, compile_sql
from shmq.store.results import parse_tag_filter

TAG = "TAG"
SQL92 = "SQL92"


@dataclass(frozen=True)
class MessageSelector:
    """An expression and its type (``TAG`` or ``SQL92``, RocketMQ's ``ExpressionType``);
    ``sql`` is the compiled filter of a SQL92 selector.

    Example::

        consumer.subscribe("Orders", MessageSelector.by_sql("region IN ('eu', 'us')"))
        consumer.subscribe("Audit", MessageSelector.by_tag("Paid || Refunded"))
    """

    expression_type: str
    expression: str
    sql: SqlFilter | None = field(default=None, compare=False, repr=False)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 property filter; raises ``FilterExpressionError`` (position and
        reason) when ``expression`` is not one."""
        return cls(SQL92, expression, compile_sql(expression))

    @classmethod
    def by_tag(cls, expression: str | None = "*") -> MessageSelector:
        """A tag expression (``*`` or ``TagA || TagB``): the same as passing the string."""
        expression = "*" if expression is None or not expression.strip() else expression.strip()
        parse_tag_filter(expression)  # refuses an expression that names no tag
        return cls(TAG, expression)

    @property
    def is_sql(self) -> bool:
        return self.sql is not None

    def __str__(self) -> str:
        return self.expression
