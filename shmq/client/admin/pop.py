"""POP groups' state on the masters: what ``shmq admin pop-status`` shows.

Each master answers ``GET_POP_STATUS`` (shmq's own request, empty body) with its POP state
per consumer group and topic: the messages popped and still invisible (in flight), those
whose invisible time passed and that wait to be revived, the group's POP retry topic and
its backlog, what was acked, revived and sent to the DLQ since the broker started, and
where the group's next pop of each queue begins. ``Admin`` documents the call.
"""

from __future__ import annotations

from typing import Any

from shmq.client.admin.remote import Remote
from shmq.remoting.protocol import RequestCode


class PopGroups:
    """The POP state of the masters' groups."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def pop_status(
        self, group: str | None = None, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        rows = []
        for name, address in self._remote.targets(broker, cluster):
            body = self._remote.call((name, address), RequestCode.GET_POP_STATUS)[1] or {}
            for g, topics in (body.get("groups") or {}).items():
                if group is None or g == group:
                    rows += [{"group": g, "topic": t, "brokerName": name, **state}
                             for t, state in topics.items()]  # fmt: skip
        return sorted(rows, key=lambda r: (r["group"], r["topic"], r["brokerName"]))
