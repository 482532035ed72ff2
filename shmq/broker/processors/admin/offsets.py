"""GET_MAX_OFFSET, GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP
(RocketMQ's ``AdminBrokerProcessor``): a queue's offsets as the store holds them
(``store_view``), the answers a consumer's offset store and ``mqadmin`` ask for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.processors.processor import Processor
from shmq.errors import ResponseError
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.server import Connection


class OffsetLookups(Processor):
    """The four codes above."""

    CODES: ClassVar[Mapping[int, str]] = {
        RequestCode.GET_MAX_OFFSET: "max_offset",
        RequestCode.GET_MIN_OFFSET: "min_offset",
        RequestCode.GET_EARLIEST_MSG_STORETIME: "earliest_store_time",
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: "search_offset",
    }

    def max_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = self.ctx.store.max_offset(request.ext_topic(), request.ext_int("queueId"))
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})

    def min_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        offset = self.ctx.store.min_offset(request.ext_topic(), request.ext_int("queueId"))
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})

    def earliest_store_time(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: the store time of the queue's first stored message
        (4.9 answers SYSTEM_ERROR when there is none)."""
        topic, qid = request.ext_topic(), request.ext_int("queueId")
        first = self.ctx.store.min_offset(topic, qid)
        stamp = None
        if first < self.ctx.store.max_offset(topic, qid):
            stamp = self.ctx.store.store_timestamp(topic, qid, first)
        if stamp is None:
            raise ResponseError(ResponseCode.SYSTEM_ERROR, f"no message stored in {topic}:{qid}")
        return RemotingCommand.response_to(request, ext_fields={"timestamp": stamp})

    def search_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        topic, qid = request.ext_topic(), request.ext_int("queueId")
        offset = self.ctx.store.offset_by_time(topic, qid, request.ext_int("timestamp"))
        return RemotingCommand.response_to(request, ext_fields={"offset": offset})
