"""Wake-ups between a producer's threads and the broker's agents: many threads of one
producer park on its one semaphore at once (sync sends waiting for answers and, in
SYNC_FLUSH, for the flush; async sends in the completion thread), and every one of them is
woken by a post, never by its park timeout running out."""

from __future__ import annotations

import threading

import pytest

from e2e_helpers import cluster, shm_entries
from shmq.client.producer.producer import Producer
from shmq.client.types import SendStatus
from shmq.message import Message

TOPIC = "Wakeups"


@pytest.fixture(scope="module")
def sync_flush_broker(tmp_path_factory):
    before = shm_entries()
    with cluster(tmp_path_factory.mktemp("wakeups"), flushDiskType="SYNC_FLUSH") as c:
        c.create_topic(TOPIC, 4)
        yield c
    assert shm_entries() - before == set()


def test_many_threads_of_one_producer_are_each_woken_by_a_post(sync_flush_broker):
    threads, per_thread = 8, 60
    errors: list[BaseException] = []
    statuses: list[SendStatus] = []
    # spin_us=0: every wait parks at once, so the wake-up path is what is exercised
    with Producer("wakeups", sync_flush_broker.namesrv, spin_us=0, send_timeout=20) as producer:
        producer.send(Message(TOPIC, b"warm"))

        def sender(k: int) -> None:
            try:
                futures = []
                for i in range(per_thread):
                    msg = Message(TOPIC, f"{k}-{i}".encode())
                    if i % 2:
                        futures.append(producer.send_async(msg))
                    else:
                        statuses.append(producer.send(msg).send_status)
                statuses.extend(f.result(30).send_status for f in futures)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        workers = [threading.Thread(target=sender, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert not errors, errors
        assert statuses == [SendStatus.SEND_OK] * (threads * per_thread)
        [link] = producer.stats()["brokers"].values()
    assert link["parks"] > threads  # the threads did park, many at a time
    assert link["missed_wakeups"] == 0


def test_threads_of_one_reader_long_polling_different_queues_are_each_woken(
    sync_flush_broker,
):
    """Each parked thread publishes the queues it waits for in the reader's one registry
    line: a thread that parks later must not narrow that to its own queue, or a message on
    the first thread's queue wakes nobody and waits out the first thread's park (1 s)."""
    from waiting import wait_for

    from shmq.client.transport.queue_reader import QueueReader

    producer = Producer("wakeups-readers", sync_flush_broker.namesrv)
    with producer, QueueReader("wakeups-readers", sync_flush_broker.namesrv, spin_us=0) as reader:
        queues = sorted(reader.queues(TOPIC), key=lambda mq: mq.queue_id)[:2]

        def send(mq, body: bytes) -> None:
            producer.send(Message(TOPIC, body), selector=lambda mqs, msg, arg: arg, arg=mq)

        for mq in queues:  # stored once, so each has its slot in the queue table
            send(mq, b"warm")
        ends = {mq: reader.max_offset(mq) for mq in queues}
        link = reader._link(queues[0])
        results: dict = {}

        def poll(mq) -> None:
            results[mq] = reader.pull(mq, ends[mq], max_nums=1, timeout=20)

        threads = []
        for k, mq in enumerate(queues):  # the second parks after the first
            threads.append(threading.Thread(target=poll, args=(mq,)))
            threads[-1].start()
            wait_for(lambda k=k: link.parking.count == k + 1, what=f"{k + 1} thread(s) parked")
        for mq in queues:  # the first thread's queue first
            send(mq, f"to {mq.queue_id}".encode())
            wait_for(lambda mq=mq: mq in results, what=f"the poll of queue {mq.queue_id}")
        for t in threads:
            t.join(30)
        for mq in queues:
            assert [m.body for m in results[mq].messages] == [f"to {mq.queue_id}".encode()]
        assert link.parking.missed_wakeups == 0
