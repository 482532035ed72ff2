"""The control-plane requests of transactional messages: ``END_TRANSACTION`` from
producers, mqadmin's RESUME_CHECK_HALF_MESSAGE (a discarded half message checked again) and
shmq's ``GET_TRANSACTION_STATUS`` for ``shmq admin trans-status``; the work is the
transaction service's (``transactions``)."""

from __future__ import annotations

from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from shmq.broker.context import BrokerContext
from shmq.broker.transaction.service import EndRequest, TransactionService
from shmq.errors import InvalidMessageIdError
from shmq.message import parse_offset_msg_id
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode, ResponseError
from shmq.remoting.server import Connection, RemotingServer

END_ANSWER_TIMEOUT_S = 30.0  # a two-way END_TRANSACTION waits this long for its outcome


class TransactionHandlers:
    """The three codes; ``transactions`` does the work."""

    def __init__(self, ctx: BrokerContext, transactions: TransactionService) -> None:
        self.ctx = ctx
        self.transactions = transactions

    def register(self, server: RemotingServer) -> None:
        server.register(RequestCode.END_TRANSACTION, self.end_transaction)
        server.register(RequestCode.GET_TRANSACTION_STATUS, self.status)
        server.register(RequestCode.RESUME_CHECK_HALF_MESSAGE, self.resume_check)

    def _master_only(self, what: str) -> None:
        if self.ctx.config.broker_role == "SLAVE":
            remark = f"the broker is a slave: {what} goes to the master"
            raise ResponseError(ResponseCode.SLAVE_NOT_AVAILABLE, remark)

    def end_transaction(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand | None:
        """RocketMQ's producers send it oneway (no answer); a two-way request is answered
        once the outcome is written, or with the reason nothing was."""
        self._master_only("END_TRANSACTION")
        fields = request.ext_fields
        oneway = request.is_oneway
        done = None if oneway else Future()
        self.transactions.end(EndRequest(
            request.ext_group("producerGroup"),
            request.ext_int("commitLogOffset"),
            request.ext_int("tranStateTableOffset"),
            request.ext_int("commitOrRollback"),
            fields.get("fromTransactionCheck", "false").lower() == "true",
            fields.get("msgId", ""),
            done,
        ))  # fmt: skip
        if done is None:
            return None
        try:
            done.result(END_ANSWER_TIMEOUT_S)
        except FutureTimeout:
            raise ResponseError(ResponseCode.SYSTEM_BUSY, "the transaction is still being "
                                f"ended after {END_ANSWER_TIMEOUT_S:g} s") from None  # fmt: skip
        return RemotingCommand.response_to(request)

    def resume_check(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """``msgId``: the offset message id of a half message discarded to
        ``TRANS_CHECK_MAX_TIME_TOPIC``, which goes back to the half queue."""
        self._master_only("RESUME_CHECK_HALF_MESSAGE")
        msg_id = request.ext("msgId")
        try:
            _host, offset = parse_offset_msg_id(msg_id)
        except InvalidMessageIdError as exc:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"msgId: {exc}") from None
        self.transactions.resume(offset)
        return RemotingCommand.response_to(request)

    def status(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        group = request.ext_fields.get("producerGroup") or None
        body = self.transactions.status(group)
        return RemotingCommand.response_to(request, body=RemotingCommand.body_json(body))
