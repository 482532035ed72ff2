"""The ``shmq`` source reading a broker through RocketMQ's protocol, for a store on another host.

When the broker's store is not on this host (the test the clients' ``transport="auto"``
makes: ``client.transport.broker_is_local``), or with option ``transport=tcp``, the driver
plans from the broker's answers instead of its files (``RemoteCatalog``: topic configs,
GET_MIN_OFFSET / GET_MAX_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP), and executors read their
offset ranges with PULL_MESSAGE (``read_range``). A pull's body holds the stored records as
the CommitLog has them; they decode with the clients' pull-body parser and become rows
through the same ``decode.record_batch`` as the local path, so both give the same rows.
Pulls commit no offset: a Spark query keeps its offsets in its checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from shmq.client.transport.tcp_pull import PULL_STATUSES, PULL_TIMEOUT_S, pull_request
from shmq.client.types import MessageQueue, PullStatus
from shmq.codec.pull_body import parse_pull_body
from shmq.errors import ResponseError, StoreError
from shmq.filter.sql92 import SqlFilter, compile_sql
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode
from shmq.spark.decode import arrow_schema, record_batch, sql_matched
from shmq.spark.options import ReadOptions
from shmq.spark.spec import BATCH_BYTES, BrokerSource, ScanSpec, report_lost

log = logging.getLogger(__name__)

PULL_BATCH = 32  # 4.9's maxTransferCountOnMessageInMemory: what one pull answers at most
BATCH_ROWS = 4096  # rows gathered from several pulls into one Arrow batch (at most)


class RemoteCatalog:
    """``Catalog``'s questions answered by the broker at ``address`` (driver only)."""

    def __init__(self, opts: ReadOptions, address: str) -> None:
        self.opts = opts
        self.source = BrokerSource(address, credentials=opts.credentials, tls=opts.tls)
        self.client = RemotingClient(credentials=opts.credentials, tls=opts.tls)
        self.where = f"the broker at {address}"

    def _ask(self, code: int, fields: dict) -> int:
        response, _ = self.client.invoke_json(self.source.address, code, fields)
        return int(response.ext_fields["offset"])

    def _topic_configs(self) -> dict[str, dict]:
        _, body = self.client.invoke_json(self.source.address, RequestCode.GET_ALL_TOPIC_CONFIG)
        return (body or {}).get("topicConfigTable", {})

    def queues(self) -> list[tuple[str, int]]:
        """The subscribed (topic, queue id)s of the broker's topic configs, sorted."""
        return sorted(
            (topic, qid)
            for topic, cfg in self._topic_configs().items()
            if self.opts.matches(topic)
            for qid in range(int(cfg.get("readQueueNums", 0)))
        )

    def topics(self) -> set[str]:
        """Every topic the broker has a config for."""
        return set(self._topic_configs())

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self._ask(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})

    def min_offset(self, topic: str, queue_id: int, max_offset: int | None = None) -> int:
        high = self.max_offset(topic, queue_id) if max_offset is None else max_offset
        low = self._ask(RequestCode.GET_MIN_OFFSET, {"topic": topic, "queueId": queue_id})
        return min(low, high)

    def offset_by_time(
        self, topic: str, queue_id: int, timestamp_ms: int, low: int, high: int
    ) -> int:
        found = self._ask(
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms},
        )
        return min(max(found, low), high)

    def refresh(self) -> None:
        """Nothing is cached: every answer is the broker's at the time."""

    def close(self) -> None:
        self.client.close()


def read_range(spec: ScanSpec, topic: str, queue_id: int, start: int, end: int
               ) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """Arrow batches of the messages at offsets ``[start, end)`` of one queue, pulled from
    ``spec.source`` (a ``BrokerSource``). Offsets the broker no longer has (it answers
    that they moved) are data loss, as in the local path."""
    source = spec.source
    assert isinstance(source, BrokerSource)
    schema = arrow_schema(spec.include_properties, spec.include_headers)
    tags = spec.tags
    expression = " || ".join(sorted(tags)) if tags is not None else "*"
    wanted = pa.array(sorted(tags), pa.string()) if tags is not None else None
    # evaluated here, as the local path does: the broker need not enablePropertyFilter
    sql = None if spec.sql is None else compile_sql(spec.sql)
    mq = MessageQueue(topic, "", queue_id)
    bodies: list[bytes] = []
    size = 0
    offset = start
    with RemotingClient(default_timeout=PULL_TIMEOUT_S, credentials=source.credentials,
                        tls=source.tls) as client:  # fmt: skip
        while offset < end:
            request = pull_request(source.group, mq, offset, PULL_BATCH, expression, 0)
            reply = client.invoke(source.address, request)
            status = PULL_STATUSES.get(reply.code)
            if status is None:
                raise ResponseError(
                    reply.code, f"pull of {topic}:{queue_id} from {source.address}: {reply.remark}"
                )
            next_offset = int(reply.ext_fields["nextBeginOffset"])
            if next_offset <= offset:
                raise StoreError(
                    f"{topic} queue {queue_id}: the broker {source.address} has nothing at "
                    f"offset {offset} ({reply.remark}), below the planned end {end}"
                )
            if status is PullStatus.FOUND:
                bodies.append(reply.body)
                size += len(reply.body)
            elif status is not PullStatus.NO_MATCHED_MSG:  # the offsets moved: cleaned
                report_lost(topic, queue_id, offset, min(next_offset, end), "messages",
                            spec.fail_on_data_loss)  # fmt: skip
            offset = next_offset
            if bodies and (len(bodies) * PULL_BATCH >= BATCH_ROWS or size >= BATCH_BYTES
                           or offset >= end):  # fmt: skip
                yield from _batch(b"".join(bodies), topic, queue_id, end, schema, wanted, sql)
                bodies, size = [], 0


def _batch(
    body: bytes, topic: str, queue_id: int, end: int, schema: pa.Schema,
    wanted: pa.Array | None, sql: SqlFilter | None,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    buf, rows = parse_pull_body(body, topic, queue_id)
    rows = sql_matched(buf, np.ascontiguousarray(rows[rows["queue_offset"] < end]), sql)
    if not rows.shape[0]:
        return
    batch = record_batch(buf, rows, topic, schema)
    if wanted is not None:  # the broker matched tag hashes; keep exact tags only
        batch = batch.filter(pc.fill_null(pc.is_in(batch.column(6), wanted), False))
    if batch.num_rows:
        yield batch
