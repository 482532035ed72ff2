"""Send round trips measured from the admin's side, as mqadmin's ``sendMsgStatus``,
``checkMsgSendRT`` and ``clusterRT`` measure them: a producer of the admin's namesrvs (and
credentials) sends bodies of ``size`` bytes of ``a`` and times each synchronous send. The
first send of a run pays for the route lookup and the connection: ``sendMsgStatus`` sends
a 16-byte message first, the others leave the first send out of their averages, as
mqadmin does. ``Admin`` documents each call.
"""

from __future__ import annotations

import time
from typing import Any

from shmq.client.admin.remote import Remote
from shmq.client.types import MessageQueue
from shmq.errors import ClientError
from shmq.message import Message

SEND_STATUS_GROUP = "PID_SMSC"  # sendMsgStatus's producer group
WARM_UP_SIZE = 16


class SendLatency:
    """Timed sends through a producer of ``remote``'s namesrvs."""

    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def send_msg_status(
        self, broker_name: str, message_size: int = 128, count: int = 50
    ) -> list[dict[str, Any]]:
        with self._producer(SEND_STATUS_GROUP) as producer:
            producer.send(Message(broker_name, b"a" * WARM_UP_SIZE))
            rows = []
            for _ in range(count):
                start = time.perf_counter()
                result = producer.send(Message(broker_name, b"a" * message_size))
                rows.append({"rtMs": _ms_since(start), "sendResult": result.to_json()})
        return rows

    def check_msg_send_rt(self, topic: str, amount: int = 100, size: int = 128) -> dict[str, Any]:
        sends = []
        chosen: list[MessageQueue] = []  # the queue of the send under way

        def select(queues: list[MessageQueue], _msg: Message, n: int) -> MessageQueue:
            chosen.append(queues[n % len(queues)])  # send i to queue i, round the route
            return chosen[-1]

        with self._producer(_run_group()) as producer:
            for i in range(amount):
                chosen.clear()
                start = time.perf_counter()
                try:
                    producer.send(Message(topic, b"a" * size), selector=select, arg=i)
                    ok = True
                except Exception:  # a failed send is a result here, as in mqadmin
                    ok = False
                rt = _ms_since(start)
                mq = chosen[-1] if chosen else None
                sends.append({"brokerName": mq.broker_name if mq else None,
                              "queueId": mq.queue_id if mq else None, "sendResult": ok,
                              "rtMs": rt})  # fmt: skip
        return {"topic": topic, "sends": sends, "avgRtMs": _average(sends)}

    def cluster_rt(
        self, cluster: str | None = None, amount: int = 100, size: int = 128
    ) -> list[dict[str, Any]]:
        clusters = self._remote.cluster_info().get("clusterAddrTable", {})
        names = [cluster] if cluster is not None else sorted(clusters)
        for name in names:
            if name not in clusters:
                known = ", ".join(sorted(clusters)) or "none"
                raise ClientError(f"cluster [{name}] not exist (clusters: {known})")
        rows = []
        with self._producer(_run_group()) as producer:
            for name in names:
                for broker in sorted(clusters[name]):
                    sends = []
                    for _ in range(amount):
                        start = time.perf_counter()
                        try:
                            producer.send(Message(broker, b"a" * size))
                            ok = True
                        except Exception:  # counted as a failure, as in mqadmin
                            ok = False
                        sends.append({"sendResult": ok, "rtMs": _ms_since(start)})
                    successes = sum(s["sendResult"] for s in sends)
                    rows.append({"cluster": name, "brokerName": broker,
                                 "rtMs": _average(sends), "successCount": successes,
                                 "failCount": amount - successes})  # fmt: skip
        return rows

    def _producer(self, group: str):
        # a producer loads numba: imported for these commands only
        from shmq.client.producer.producer import Producer

        return Producer(group, self._remote.namesrvs, credentials=self._remote.credentials,
                        tls=self._remote.tls)  # fmt: skip


def _run_group() -> str:
    """A producer group of one run, as mqadmin names it (the time in ms)."""
    return str(int(time.time() * 1000))


def _ms_since(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def _average(sends: list[dict[str, Any]]) -> float:
    """The mean RT of the sends after the first (which pays for the route and the
    connection); the first's own when it is the only one."""
    timed = sends[1:] or sends
    return round(sum(s["rtMs"] for s in timed) / len(timed), 3) if timed else 0.0
