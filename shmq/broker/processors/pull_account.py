"""What an answered TCP pull tells the broker: the group's gets (``get_counts``, 4.9's
``incGroupGetNums``), where the pull left the queue (``BrokerEvents.pulled``: the metrics'
ready and in-flight messages) and the offset it commits (the commit bit).

The supervisor's pull processor applies it at once; the data server's (another process,
``broker.data_server``) sends it to the control server as one oneway ``RELAY_PULLED`` over
the client's relay link, where ``apply`` runs the same way, so the broker learns the same
from a pull wherever it was answered.
"""

from __future__ import annotations

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

    def request(self) -> RemotingCommand:
        """As a oneway ``RELAY_PULLED`` (absent fields: ``None``)."""
        fields = {"group": self.group, "topic": self.topic, "queueId": self.queue_id,
                  "size": self.size}  # fmt: skip
        for name, value in (("count", self.count), ("pulledTo", self.pulled_to),
                            ("commitOffset", self.commit_offset)):  # fmt: skip
            if value is not None:
                fields[name] = value
        return RemotingCommand.request(RequestCode.RELAY_PULLED, fields, oneway=True)

    @classmethod
    def of(cls, request: RemotingCommand) -> PullAccount:
        """A ``RELAY_PULLED``'s account; ``ValueError``/``KeyError`` when it is malformed."""
        f = request.ext_fields

        def number(name: str) -> int | None:
            return int(f[name]) if name in f else None

        return cls(f["group"], f["topic"], int(f["queueId"]), number("count"),
                   int(f.get("size", 0)), number("pulledTo"), number("commitOffset"))  # fmt: skip
