"""Messages read in queue order, as mqadmin's ``printMsg``, ``printMsgByQueue`` and
``queryMsgByOffset`` read them: PULL_MESSAGE as the ``TOOLS_CONSUMER`` group (which commits
nothing), 32 at a time, over a queue's offsets or those of a time range (each end found
with SEARCH_OFFSET_BY_TIMESTAMP). Unlike the queries by id or key, this reads a queue
without any index, so it finds every message a consumer would. Bodies come decompressed as
the other queries give them (``messages.plain_body``). ``Admin`` documents each call.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from shmq.client.admin.message.queries import plain_body
from shmq.client.admin.remote import Broker, Remote
from shmq.client.admin.topics import subscribe_queues
from shmq.client.types import MessageQueue
from shmq.errors import ClientError, ResponseError
from shmq.message import message_to_json
from shmq.remoting.protocol import RequestCode, ResponseCode

TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # MixAll.TOOLS_CONSUMER_GROUP
PULL_BATCH = 32  # messages per pull, as mqadmin's
# a pull's answers that end a queue's reading (no message there, or the offset is outside it)
_END_OF_QUEUE = (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)


class QueueBrowser:
    """Queue offset ranges, and the messages within them, read with pulls."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def queue_ranges(
        self,
        topic: str,
        begin: int | None = None,
        end: int | None = None,
        broker: str | None = None,
        queue_id: int | None = None,
    ) -> list[dict[str, Any]]:
        masters = self._masters(topic)
        if broker is not None and broker not in masters:
            raise ClientError(
                f"broker {broker} serves no queue of topic {topic} (it is on"
                f" {', '.join(sorted(masters))})"
            )
        route = self._remote.topic_route(topic)
        queues = [mq for mq in subscribe_queues(topic, route) if broker in (None, mq.broker_name)]
        if queue_id is not None:
            queues = [mq for mq in queues if mq.queue_id == queue_id]
            if not queues:
                raise ClientError(f"topic {topic} has no readable queue {queue_id} on {broker}")
        ranges = []
        for mq in queues:
            target = (mq.broker_name, masters[mq.broker_name])
            low = self._offset(target, mq, RequestCode.GET_MIN_OFFSET)
            high = self._offset(target, mq, RequestCode.GET_MAX_OFFSET)
            if begin is not None:
                low = self._offset(target, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, begin)
            if end is not None:
                high = self._offset(target, mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, end)
            ranges.append({"topic": topic, "brokerName": mq.broker_name, "queueId": mq.queue_id,
                           "minOffset": low, "maxOffset": high})  # fmt: skip
        return ranges

    def browse_queue(
        self, topic: str, broker: str, queue_id: int, start: int, stop: int, expression: str = "*"
    ) -> Iterator[dict[str, Any]]:
        from shmq.client.consumer.subscription import Subscription

        subscription = Subscription.parse(topic, expression)
        target = self._target(topic, broker)
        mq = MessageQueue(topic, broker, queue_id)
        offset = start
        while offset < stop:
            found, next_offset = self._pull(target, mq, offset, subscription.expression)
            if found is None or next_offset <= offset:
                return
            offset = next_offset
            for msg in subscription.filter(found):
                if msg.queue_offset < stop:
                    yield plain_body(message_to_json(msg))

    def query_msg_by_offset(
        self, topic: str, broker: str, queue_id: int, offset: int
    ) -> dict[str, Any]:
        mq = MessageQueue(topic, broker, queue_id)
        found, _ = self._pull(self._target(topic, broker), mq, offset, "*", 1)
        if not found:
            raise ClientError(f"no message at offset {offset} of {topic}:{queue_id} on {broker}")
        return plain_body(message_to_json(found[0]))

    # -- the requests -----------------------------------------------------------------------

    def _masters(self, topic: str) -> dict[str, str]:
        return dict(self._remote.topic_brokers(topic))

    def _target(self, topic: str, broker: str) -> Broker:
        """The master of broker name ``broker``, which must serve ``topic``."""
        addr = self._masters(topic).get(broker)
        if addr is None:
            raise ClientError(f"broker {broker} serves no queue of topic {topic}")
        return broker, addr

    def _offset(self, target: Broker, mq: MessageQueue, code: int, timestamp: int = 0) -> int:
        fields: dict[str, Any] = {"topic": mq.topic, "queueId": mq.queue_id}
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            fields["timestamp"] = timestamp
        return self._remote.invoke(target, code, fields).ext_int("offset")

    def _pull(
        self, target: Broker, mq: MessageQueue, offset: int, expression: str,
        max_nums: int = PULL_BATCH,
    ) -> tuple[list | None, int]:  # fmt: skip
        """The messages of one pull from ``offset`` (None at the queue's end; a list, maybe
        empty, when the broker's filter skipped them) and where the next pull starts."""
        # the pull decoder loads numba: imported for the commands that read queues only
        from shmq.client.transport.tcp_pull import pull_request
        from shmq.codec.pull_body import parse_pull_body
        from shmq.message import stored_message

        request = pull_request(TOOLS_CONSUMER_GROUP, mq, offset, max_nums, expression, 0)
        reply = self._remote.answer(target, request)
        if reply.code in _END_OF_QUEUE:
            return None, offset
        if reply.code not in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY):
            raise ResponseError(
                reply.code, f"pull of {mq.topic}:{mq.queue_id} from broker {target[0]}"
                f" ({target[1]}) at offset {offset}: {reply.remark}"
            )  # fmt: skip
        next_offset = reply.ext_int("nextBeginOffset")
        if reply.code != ResponseCode.SUCCESS:
            return [], next_offset
        body = bytes(reply.body)
        _, rows = parse_pull_body(body, mq.topic, mq.queue_id)
        msgs = [
            stored_message(body, int(r["pos"]), mq.topic, mq.queue_id, int(r["queue_offset"]),
                           int(r["phys_offset"]), int(r["size"]))
            for r in rows
        ]  # fmt: skip
        return msgs, next_offset
