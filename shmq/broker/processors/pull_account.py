"""What an answered TCP pull tells the broker: the group's gets (``get_counts``, 4.9's
``incGroupGetNums``), where the pull left the queue (``BrokerEvents.pulled``: the metrics'
ready and in-flight messages) and the offset it commits (the commit bit).

The supervisor's pull processor applies it at once; the data server's (another process,
``broker.data_server``) sends it to the control server in a oneway ``RELAY_PULLED`` over
the client's relay link, where ``apply`` runs the same way, so the broker learns the same
from a pull wherever it was answered. A ``RELAY_PULLED`` carries the accounts of the pulls
a connection made since the last one, one per queue (``merged``: the pulls of a queue
in a row tell what they tell one after another).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shmq.remoting.codes import RequestCode
from shmq.remoting.protocol import RemotingCommand

if TYPE_CHECKING:
    from shmq.broker.context import BrokerContext


@dataclass(frozen=True)
class PullAccount:
    """One pull's account; ``None`` fields tell nothing (no messages, a slave, no commit)."""

    group: str
    topic: str
    queue_id: int
    count: int | None = None  # messages answered, with ``size`` their bytes
    size: int = 0
    pulled_to: int | None = None  # the offset the group's next pull of the queue starts at
    commit_offset: int | None = None

    def apply(self, ctx: BrokerContext) -> None:
        """Count it in the broker."""
        if self.count is not None:
            ctx.gets.pulled(self.group, self.topic, self.count, self.size)
        if self.pulled_to is not None:
            ctx.events.pulled(self.group, self.topic, self.queue_id, self.pulled_to)
        if self.commit_offset is not None:
            ctx.offsets.commit(self.group, self.topic, self.queue_id, self.commit_offset)

    @property
    def tells(self) -> bool:
        return (self.count, self.pulled_to, self.commit_offset) != (None, None, None)

    @property
    def key(self) -> tuple[str, str, int]:
        return self.group, self.topic, self.queue_id

    def merged(self, later: PullAccount) -> PullAccount:
        """This account and ``later``'s (the same queue's, a later pull) as one: the gets
        add up, the later offsets win."""
        count = self.count if later.count is None else later.count + (self.count or 0)
        pulled_to = self.pulled_to if later.pulled_to is None else later.pulled_to
        commit = self.commit_offset if later.commit_offset is None else later.commit_offset
        return PullAccount(self.group, self.topic, self.queue_id, count,
                           self.size + later.size, pulled_to, commit)  # fmt: skip

    @staticmethod
    def request(accounts: Iterable[PullAccount]) -> RemotingCommand:
        """A oneway ``RELAY_PULLED`` of ``accounts``: a JSON list in the body, each
        ``[group, topic, queueId, count, size, pulledTo, commitOffset]`` (null: absent)."""
        rows = [[a.group, a.topic, a.queue_id, a.count, a.size, a.pulled_to, a.commit_offset]
                for a in accounts]  # fmt: skip
        return RemotingCommand.request(RequestCode.RELAY_PULLED, body=json.dumps(rows).encode(),
                                       oneway=True)  # fmt: skip

    @classmethod
    def all_of(cls, request: RemotingCommand) -> list[PullAccount]:
        """A ``RELAY_PULLED``'s accounts; ``ValueError`` when it is malformed."""
        try:
            rows = json.loads(request.body or b"")
            return [cls(str(g), str(t), int(q), _number(c), int(s), _number(p), _number(o))
                    for g, t, q, c, s, p, o in rows]  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a malformed RELAY_PULLED: {exc}") from None


def _number(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]
