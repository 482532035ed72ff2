"""Half messages pending per producer group: what ``shmq admin trans-status`` shows; and
putting back a half message discarded after ``transactionCheckMax`` checks
(``shmq admin resume-check-half-msg``, mqadmin's ``resumeCheckHalfMessage``).

Each master broker answers ``GET_TRANSACTION_STATUS`` (shmq's own request) from its table of
open transactions: per producer group, how many half messages still wait for a commit or
rollback, the age of the oldest, the most check-backs one had, how many producers of the
group are online to answer a check-back, and the first transaction ids. A group with
pending halves and no producer online waits for one (its checks are not counted). ``Admin``
documents each call.
"""

from __future__ import annotations

from typing import Any

from shmq.client.admin.message.queries import MessageQueries
from shmq.client.admin.remote import Broker, Remote
from shmq.errors import ClientError, InvalidMessageIdError
from shmq.message import parse_offset_msg_id
from shmq.names import CHECK_MAX_TIME_TOPIC
from shmq.remoting.protocol import RequestCode


class Transactions:
    """Pending half messages on the masters; ``messages`` finds a discarded half by its
    transaction id."""

    def __init__(self, remote: Remote, messages: MessageQueries) -> None:
        self._remote = remote
        self._messages = messages

    def trans_status(
        self, group: str | None = None, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        fields = {"producerGroup": group} if group else None
        rows = []
        for target in self._remote.targets(broker, cluster):
            body = self._remote.call(target, RequestCode.GET_TRANSACTION_STATUS, fields)[1]
            rows += [{"brokerName": target[0], **entry} for entry in (body or {}).get("groups", [])]
        return sorted(rows, key=lambda r: (r["producerGroup"], r["brokerName"]))

    def resume_check_half_message(self, msg_id: str) -> str:
        # An offset message id and a unique key are both 32 hex digits: ``msg_id`` is taken
        # as the first, then, as mqadmin tries next, as the second.
        target = self._broker_storing(msg_id)
        if target is None:
            found = self._messages.query_msg_by_unique_key(CHECK_MAX_TIME_TOPIC, msg_id)
            msg_id = found["offsetMsgId"]
            target = self._broker_storing(msg_id)
            if target is None:
                raise ClientError(f"no master broker stores {msg_id}")
        self._remote.call(target, RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": msg_id})
        return msg_id

    def _broker_storing(self, msg_id: str) -> Broker | None:
        """The master whose store host ``msg_id`` names, when it is an offset message id."""
        try:
            host, _ = parse_offset_msg_id(msg_id)
        except InvalidMessageIdError:
            return None
        return self._remote.by_store_host(host)
