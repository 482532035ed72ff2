"""``traceTopicEnable``: the broker creates the message trace topic (``msgTraceTopicName``)
at start with one queue, and a traced client's trace messages are stored there."""

from __future__ import annotations

from waiting import wait_for

from e2e_helpers import cluster, shm_entries
from shmq.client.admin.admin import Admin
from shmq.client.producer.producer import Producer
from shmq.errors import ClientError, NoRouteError, ResponseError
from shmq.message import Message


def test_the_trace_topic_is_created_at_start_only_when_enabled(tmp_path):
    before = shm_entries()
    (tmp_path / "on").mkdir()
    (tmp_path / "off").mkdir()
    with cluster(tmp_path / "on", traceTopicEnable="true", msgTraceTopicName="MyTrace",
                 autoCreateTopicEnable="false") as c, Admin(c.namesrv) as admin:  # fmt: skip
        route = admin.topic_route("MyTrace")
        assert [(q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(1, 1)]
        admin.update_topic("Traced", read_queue_nums=1, write_queue_nums=1)
        with Producer("TopicEnablePG", c.namesrv, enable_msg_trace=True,
                      trace_topic="MyTrace") as producer:  # fmt: skip
            sent = producer.send(Message("Traced", b"x"))
        wait_for(lambda: admin.query_msg_trace_by_id(sent.msg_id, "MyTrace")["produce"],
                 ignore=(ClientError, ResponseError, NoRouteError),
                 what="the Pub record")  # fmt: skip
    with cluster(tmp_path / "off") as c, Admin(c.namesrv) as admin:
        try:
            admin.topic_route("RMQ_SYS_TRACE_TOPIC")
            raise AssertionError("the trace topic exists without traceTopicEnable")
        except NoRouteError:
            pass
    assert shm_entries() - before == set()
