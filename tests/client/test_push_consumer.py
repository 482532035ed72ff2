"""PushConsumer against a real broker: delivery, filtering, failures, flow control,
rebalance on membership change, broadcasting, where a new group starts."""

from __future__ import annotations

import collections
import threading
import time

import pytest
from waiting import wait_for

from shmq.client.consumer.push import PushConsumer
from shmq.client.producer.producer import Producer
from shmq.client.types import ConsumeResult, MessageQueue
from shmq.errors import ClientError, ConfigError
from shmq.message import Message, MessageBatch

OK = ConsumeResult.CONSUME_SUCCESS


class Sink:
    """A listener that records what it got (thread-safe)."""

    def __init__(self, pause: float = 0.0) -> None:
        self.got: list = []
        self.lock = threading.Lock()
        self.pause = pause

    def __call__(self, msgs, ctx):
        if self.pause:
            time.sleep(self.pause)
        with self.lock:
            self.got += [
                (m.queue_id, m.queue_offset, m.body.decode(), m.reconsume_times) for m in msgs
            ]
        return OK

    def bodies(self) -> collections.Counter:
        with self.lock:
            return collections.Counter(b for _, _, b, _ in self.got)


def produce(c, topic: str, n: int, tags=lambda i: None, prefix: str = "m") -> list[str]:
    bodies = [f"{prefix}{i}" for i in range(n)]
    with Producer("test-producer", c.namesrv) as producer:
        for i, b in enumerate(bodies):
            producer.send(Message(topic, b, tags=tags(i)))
    return bodies


def consumer(c, group: str, topic: str, listener, expression: str = "*", **kw) -> PushConsumer:
    kw.setdefault("consume_from_where", "FIRST_OFFSET")
    pc = PushConsumer(group, c.namesrv, listener=listener, **kw)
    pc.subscribe(topic, expression)
    return pc


def test_every_message_once_and_offsets_committed(broker):
    broker.create_topic("PushAll", 8)
    bodies = produce(broker, "PushAll", 200)
    sink = Sink()
    with consumer(broker, "g-all", "PushAll", sink, consume_message_batch_max_size=4) as pc:
        pc.start()
        assert len(pc.assignment()) == 8
        wait_for(lambda: sum(sink.bodies().values()) >= 200, what="200 messages")
        time.sleep(0.2)  # a test of absence: a message twice would come by now
    assert sink.bodies() == collections.Counter(bodies)
    per_queue = collections.defaultdict(list)
    for q, off, _, _ in sink.got:
        per_queue[q].append(off)
    with PushConsumer("g-all", broker.namesrv, listener=sink) as again:
        again.subscribe("PushAll")
        again.start()
        for mq in again.assignment():
            assert again.offsets.read(mq, from_store=True) == max(per_queue[mq.queue_id]) + 1


def test_tag_filter(broker):
    broker.create_topic("PushTags", 4)
    produce(broker, "PushTags", 60, tags=lambda i: "ABC"[i % 3])
    sink = Sink()
    with consumer(broker, "g-tags", "PushTags", sink, "A || C") as pc:
        pc.start()
        wait_for(lambda: sum(sink.bodies().values()) >= 40, what="40 tagged messages")
        time.sleep(0.3)  # a test of absence: a message tagged B would come by now
    assert sorted(int(b[1:]) for b in sink.bodies()) == [i for i in range(60) if i % 3 != 1]


def test_listener_that_raises_or_returns_none_is_retried_and_consumer_goes_on(broker, caplog):
    broker.create_topic("PushFail", 2)
    produce(broker, "PushFail", 20)
    failures = {"m3": 2, "m7": 1}
    sink = Sink()

    def listener(msgs, ctx):
        body = msgs[0].body.decode()
        if failures.get(body, 0) > 0:
            failures[body] -= 1
            if body == "m3":
                raise RuntimeError(f"cannot handle {body}")
            return None
        return sink(msgs, ctx)

    with consumer(broker, "g-fail", "PushFail", listener, reconsume_delay=0.05) as pc:
        pc.start()
        wait_for(lambda: len(sink.bodies()) == 20, what="all 20, failures included")
        stats = pc.stats()
    assert stats["failed"] == 3
    got = {b: r for _, _, b, r in sink.got}
    assert got["m3"] == 2 and got["m7"] == 1 and got["m0"] == 0
    assert "cannot handle m3" in caplog.text
    assert "not a ConsumeResult" in caplog.text


def test_ack_index_splits_a_chunk_into_consumed_and_failed(broker):
    """RocketMQ's ackIndex: on CONSUME_SUCCESS the messages after ``ack_index`` are consumed
    again; one below -1 fails the whole chunk (never Python's negative slicing)."""
    broker.create_topic("PushAck", 1)
    produce(broker, "PushAck", 8)
    sink = Sink()
    first_time = {"m0": 1, "m4": -3}  # ack_index the first time the chunk starting here comes

    def listener(msgs, ctx):
        ack = first_time.pop(msgs[0].body.decode(), None)
        if ack is not None:
            ctx.ack_index = ack
            sink(msgs[: max(ack, -1) + 1], ctx)
            return OK
        return sink(msgs, ctx)

    pc = consumer(broker, "g-ack", "PushAck", listener, consume_message_batch_max_size=4)
    with pc:
        pc.start()
        wait_for(lambda: len(sink.bodies()) == 8, what="all 8")
        time.sleep(0.3)  # a test of absence: a retry too many would come by now
    times = {b: r for _, _, b, r in sink.got}
    assert sink.bodies() == collections.Counter(f"m{i}" for i in range(8))
    # chunks [m0..m3] (acked up to m1: m2, m3 again) and [m4..m7] (all again)
    assert {b for b, r in times.items() if r} == {"m2", "m3", "m4", "m5", "m6", "m7"}


def test_listener_that_hangs_hits_consume_timeout(broker, caplog):
    broker.create_topic("PushHang", 1)
    produce(broker, "PushHang", 5)
    release = threading.Event()
    sink = Sink()
    hung = []

    def listener(msgs, ctx):
        if msgs[0].body == b"m0" and not hung:
            hung.append(True)
            release.wait(30)
            return OK
        return sink(msgs, ctx)

    try:
        with consumer(
            broker, "g-hang", "PushHang", listener, consume_timeout=0.5, reconsume_delay=0.0
        ) as pc:
            pc.start()
            wait_for(lambda: len(sink.bodies()) == 5, what="m0 consumed again after the timeout")
            mq = pc.assignment()[0]
            wait_for(lambda: pc.offsets.read(mq) == 5, what="offset past m0")
            release.set()
    finally:
        release.set()
    assert "consume_timeout" in caplog.text


def test_a_listener_that_returns_as_its_consume_timeout_passes_is_finished_once(broker):
    """The tick that gives up on a listener call past ``consume_timeout`` may have seen it
    running just before the listener returned. Its consume thread finishes the call then,
    and the tick must leave it: the message counts once as consumed, not also as failed
    and sent back to be consumed again."""
    broker.create_topic("PushRace", 1)
    produce(broker, "PushRace", 1)
    inside, go = threading.Event(), threading.Event()
    sink = Sink()

    def listener(msgs, ctx):
        inside.set()
        go.wait(30)
        return sink(msgs, ctx)

    with consumer(broker, "g-race", "PushRace", listener) as pc:
        tick_thread = threading.current_thread()

        class Running(dict):
            """What the tick reads of the running calls: for the test's own tick, the call
            still running, returned after its consume thread has finished it."""

            def values(self):
                seen = list(super().values())
                if threading.current_thread() is tick_thread:
                    go.set()
                    wait_for(lambda: not dict(self), what="the listener call finished")
                return seen

        pc._running = Running()
        pc.start()
        assert inside.wait(30)
        pc._tick(time.monotonic() + pc.consume_timeout + 1)
        mq = pc.assignment()[0]
        wait_for(lambda: pc.offsets.read(mq) == 1, what="offset past the message")
        assert pc.counters["consumed"] == 1
        assert pc.counters["failed"] == 0
        time.sleep(0.3)  # a message sent back would come again through the retry topic
        assert sink.bodies() == {"m0": 1}


def test_flow_control_keeps_process_queue_under_threshold(broker):
    broker.create_topic("PushSlow", 1)
    produce(broker, "PushSlow", 120)
    sink = Sink(pause=0.005)
    seen = []
    with consumer(
        broker,
        "g-slow",
        "PushSlow",
        sink,
        pull_threshold_for_queue=10,
        consume_thread_max=2,
        consume_thread_min=1,
    ) as pc:
        pc.start()

        def sampled_to_the_end() -> bool:  # the process queue's size, every 2 ms
            seen.extend(q["msgCount"] for q in pc.stats()["queues"].values())
            return sum(sink.bodies().values()) >= 120

        wait_for(sampled_to_the_end, interval=0.002, what="the 120 messages consumed")
        assert pc.stats()["flowControlled"] > 0
    assert max(seen) <= 10 and max(seen) >= 5


def test_a_drained_queue_pulls_again_while_the_pull_thread_waits_on_another(broker, monkeypatch):
    """A flow-controlled queue pulls again as soon as its process queue has drained, also
    while the pull thread is parked on the group's other queue (its retry queue, empty):
    the drain wakes that wait. With a flow-control delay of a minute, each of the dozen
    holds would otherwise last the pull loop's whole wait (up to 1 s)."""
    from shmq.client.consumer import push as push_consumer

    monkeypatch.setattr(push_consumer, "FLOW_CONTROL_DELAY_S", 60.0)
    broker.create_topic("PushDrained", 1)
    bodies = produce(broker, "PushDrained", 120)
    sink = Sink(pause=0.001)  # slow: the pool consumes, the pull thread runs ahead
    with consumer(broker, "g-drained", "PushDrained", sink, pull_threshold_for_queue=10,
                  consume_thread_max=2, consume_thread_min=1) as pc:  # fmt: skip
        pc.start()
        wait_for(
            lambda: sum(sink.bodies().values()) >= 120,
            timeout=6.0,
            what="the backlog, each flow-control hold ended by the drain",
        )
        assert pc.stats()["flowControlled"] >= 5
    assert sink.bodies() == collections.Counter(bodies)


def test_a_consumer_that_keeps_up_pulls_once_per_arrival(broker, monkeypatch):
    """Paced messages wake the pull thread one at a time: the pull that reads the queue to
    its max offset is followed by a wait, not by a second, empty pull (which cost every
    wake-up of a consumer that keeps up a whole pull). And only that queue is pulled and
    looked at: the retry queue it also waits on is not visited per arrival (``_follow``)."""
    from shmq.client.consumer.push import PushConsumer as Push
    from shmq.client.transport import queue_reader

    pulls = collections.Counter()
    turns = collections.Counter()

    def counting(cls, name, counter):
        real = getattr(cls, name)

        def counted(self, mq, *args, **kwargs):
            counter[mq.topic] += 1
            return real(self, mq, *args, **kwargs)

        monkeypatch.setattr(cls, name, counted)

    counting(queue_reader.QueueReader, "pull", pulls)  # a pull thread pulls by either
    counting(queue_reader.Follower, "pull", pulls)
    counting(Push, "_pull_due", turns)
    broker.create_topic("PushPaced", 1)
    sink = Sink()
    n = 40
    with consumer(broker, "g-paced", "PushPaced", sink) as pc:
        pc.start()
        wait_for(lambda: pc.assignment(), timeout=10.0, what="the queue assigned")
        wait_for(lambda: pulls["PushPaced"] > 0, timeout=10.0, what="the first pull")
        before = pulls["PushPaced"]
        retry_turns = turns["%RETRY%g-paced"]
        with Producer("test-paced", broker.namesrv) as producer:
            for i in range(n):
                producer.send(Message("PushPaced", f"p{i}"))
                time.sleep(0.005)
        wait_for(lambda: len(sink.got) >= n, timeout=10.0, what="every paced message")
        arrivals = pulls["PushPaced"] - before
        retry_turns = turns["%RETRY%g-paced"] - retry_turns
    assert sink.bodies() == collections.Counter(f"p{i}" for i in range(n))
    assert arrivals <= n + 5, f"{arrivals} pulls for {n} messages that came one at a time"
    assert retry_turns <= 10, f"the retry queue was looked at {retry_turns} times"


def test_membership_change_rebalances_at_once(broker):
    """Two members split 8 queues; when one leaves the other takes all of them long before
    the periodic rebalance (60 s here), and nothing is lost across the change."""
    broker.create_topic("PushGroup", 8)
    produce(broker, "PushGroup", 80, prefix="a")
    a_sink, b_sink = Sink(), Sink()
    a = consumer(broker, "g-group", "PushGroup", a_sink, rebalance_interval=60)
    b = consumer(broker, "g-group", "PushGroup", b_sink, rebalance_interval=60)
    try:
        a.start()
        assert len(a.assignment()) == 8
        b.start()
        wait_for(
            lambda: len(a.assignment()) == 4 and len(b.assignment()) == 4,
            timeout=10,
            what="a 4/4 split",
        )
        assert set(a.assignment()).isdisjoint(b.assignment())
        wait_for(
            lambda: sum(a_sink.bodies().values()) + sum(b_sink.bodies().values()) >= 80,
            what="80 messages consumed by the two members",
        )
        b.shutdown()
        wait_for(lambda: len(a.assignment()) == 8, timeout=10, what="a to take b's queues")
        produce(broker, "PushGroup", 80, prefix="b")
        wait_for(lambda: all(f"b{i}" in a_sink.bodies() for i in range(80)), what="second batch")
    finally:
        b.shutdown()
        a.shutdown()
    everything = a_sink.bodies() + b_sink.bodies()
    assert set(everything) == {f"a{i}" for i in range(80)} | {f"b{i}" for i in range(80)}


def test_broadcasting_delivers_everything_to_each_and_keeps_local_offsets(broker, tmp_path):
    broker.create_topic("PushBcast", 4)
    bodies = produce(broker, "PushBcast", 40)
    sinks = [Sink(), Sink()]
    members = [
        consumer(
            broker,
            "g-bcast",
            "PushBcast",
            s,
            message_model="BROADCASTING",
            offset_store_dir=str(tmp_path),
            instance_name=f"i{n}",
        )
        for n, s in enumerate(sinks)
    ]
    try:
        for m in members:
            m.start()
        for s in sinks:
            wait_for(lambda s=s: sum(s.bodies().values()) >= 40, what="every message to each")
    finally:
        for m in members:
            m.shutdown()
    for s in sinks:
        assert s.bodies() == collections.Counter(bodies)
    assert (tmp_path / "i0" / "g-bcast" / "offsets.json").exists()


def test_consume_from_where_for_a_new_group(broker, monkeypatch):
    broker.create_topic("PushWhere", 1)
    produce(broker, "PushWhere", 10)
    mq = MessageQueue("PushWhere", "broker-a", 0)
    future = time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() + 3600))
    for where in ("LAST_OFFSET", "FIRST_OFFSET", "TIMESTAMP"):
        with consumer(
            broker,
            f"g-where-{where}",
            "PushWhere",
            Sink(),
            consume_from_where=where,
            consume_timestamp=future,
        ) as pc:
            pc.start()
            # the queue starts at 0 with its first message in memory: RocketMQ 4.9's broker
            # answers the new group's offset query with 0, which its client takes for every
            # ConsumeFromWhere (RebalancePushImpl.computePullFromWhere)
            assert pc.rebalance.start_offset(mq) == 0
            if where == "TIMESTAMP":
                # no offset at all (its broker's QUERY_NOT_FOUND): the search by time decides
                monkeypatch.setattr(pc.rebalance.offsets, "read", lambda mq, from_store: -1)
                assert pc.rebalance.start_offset(mq) == 10


def test_bad_configuration_is_refused(broker):
    with pytest.raises(ConfigError, match="pull_threshold_for_queue"):
        PushConsumer("g", broker.namesrv, pull_threshold_for_queue=0)
    with pytest.raises(ConfigError, match="message_model"):
        PushConsumer("g", broker.namesrv, message_model="SOMETIMES")
    with pytest.raises(ConfigError, match="consumer group"):
        PushConsumer("bad group!", broker.namesrv)
    with pytest.raises(ConfigError, match="consume_timestamp"):
        PushConsumer("g", broker.namesrv, consume_timestamp="yesterday")
    pc = PushConsumer("g", broker.namesrv)
    with pytest.raises(ClientError, match="listener"):
        pc.start()


def test_bulk_listener_gets_batches_and_a_failed_batch_comes_again(broker):
    broker.create_topic("PushBulk", 2)
    with Producer("test-producer", broker.namesrv) as producer:
        for q in range(2):  # send_bulk picks one queue per call, round robin
            producer.send_bulk("PushBulk", [f"q{q}-{i}".encode() for i in range(300)])
    got: list = []
    failed_once: set = set()
    lock = threading.Lock()

    def on_batch(batch, ctx):
        assert isinstance(batch, MessageBatch)
        first = (batch.queue_id, int(batch.queue_offsets[0]))
        with lock:
            if first not in failed_once:  # every batch fails once, then succeeds
                failed_once.add(first)
                return ConsumeResult.RECONSUME_LATER
            offsets = batch.queue_offsets.tolist()
            got.extend(zip([batch.queue_id] * len(batch), offsets, batch, strict=True))
        return OK

    with consumer(broker, "g-bulk", "PushBulk", on_batch, bulk=True, pull_batch_size=5000,
                  reconsume_delay=0.05) as pc:  # fmt: skip
        pc.start()
        wait_for(lambda: len(got) >= 600, what="600 messages in batches")
        time.sleep(0.2)  # a test of absence: a batch twice would come by now
        assert pc.stats()["failed"] >= 600 // 300
        for mq in pc.assignment():
            wait_for(lambda mq=mq: pc.offsets.read(mq) == 300, what="offsets at the end")
    assert sorted(b for _, _, b in got) == sorted(
        f"q{q}-{i}".encode() for q in range(2) for i in range(300)
    )
    assert sorted((q, o) for q, o, _ in got) == [(q, o) for q in range(2) for o in range(300)]
    with pytest.raises(ConfigError, match="pull_batch_size"):
        PushConsumer("g-bulk2", broker.namesrv, pull_batch_size=5000)  # only with bulk=True


def test_a_backlog_on_one_queue_does_not_starve_another(broker):
    """Each pull of a queue is followed by the other queues' turns: both queues' messages
    come early, not one backlog after the other (a listener that then blocks, in the pull
    thread when it is fast, has seen both queues)."""
    broker.create_topic("PushBurst", 2)
    produce(broker, "PushBurst", 4_000)
    sink = Sink()
    with consumer(broker, "g-burst", "PushBurst", sink) as pc:
        pc.start()
        wait_for(lambda: sum(sink.bodies().values()) >= 4_000, what="4,000 messages")
    first = {q for q, _, _, _ in sink.got[:1_000]}
    assert first == {0, 1}


@pytest.mark.parametrize("pace", ["fast", "slow"])
def test_a_backlog_for_a_fast_listener_moves_to_the_pull_thread(broker, pace):
    """The first calls go to the pool; a listener that takes a few µs of Python per
    message is fast however many messages a pull brings (the pace is per message), and its
    calls come back to the pull thread. A slow one (it sleeps) never runs there."""
    topic, group, total = f"PushPace{pace}", f"g-pace-{pace}", 8_000
    broker.create_topic(topic, 1)
    with Producer("pace-p", broker.namesrv) as producer:
        producer.send_bulk(topic, [b"%d" % i for i in range(total)])
    names: list[str] = []

    def listener(msgs, ctx):
        if pace == "slow":
            time.sleep(0.002)
        else:  # holds the GIL about 5 µs per message
            end = time.perf_counter() + 5e-6 * len(msgs)
            while time.perf_counter() < end:
                pass
        names.extend(threading.current_thread().name for _ in msgs)
        return OK

    with consumer(broker, group, topic, listener) as pc:
        pc.start()
        wait_for(lambda: len(names) >= total, timeout=60, what="the backlog consumed")
    in_pull_thread = sum(1 for name in names[total // 2 :] if name.startswith("shmq-pull"))
    assert (in_pull_thread > 0) == (pace == "fast"), collections.Counter(names)


def test_a_listener_that_blocks_in_the_pull_thread_does_not_stop_the_other_queues(
    broker, caplog, monkeypatch
):
    """A fast listener is called in the pull thread; when a call there blocks, a new pull
    thread takes over after INLINE_HANDOVER_S and the rest is consumed meanwhile (as
    RocketMQ's consume threads would); the blocked call's messages come once it returns,
    and until then the offset committed for their queue stays at the first of them."""
    from shmq.client.consumer import listener_pace

    monkeypatch.setattr(listener_pace, "DIRECT_LISTENER_S", 1.0)  # fast on a loaded machine
    broker.create_topic("PushBlock", 2)
    bodies = produce(broker, "PushBlock", 400)
    gate, blocked = threading.Event(), threading.Event()
    sink = Sink()
    held: list = []  # the blocked call's queue id and first offset

    def listener(msgs, ctx):
        inline = threading.current_thread().name.startswith("shmq-pull")
        if inline and not blocked.is_set() and sum(sink.bodies().values()) >= 50:
            held[:] = [msgs[0].queue_id, msgs[0].queue_offset]
            blocked.set()
            gate.wait(60)
        return sink(msgs, ctx)

    with consumer(broker, "g-block", "PushBlock", listener,
                  consume_message_batch_max_size=32) as pc:  # fmt: skip
        pc.start()
        wait_for(blocked.is_set, what="a listener call blocking the pull thread")
        stuck = 32  # at most one request's messages wait behind the blocked call
        wait_for(
            lambda: sum(sink.bodies().values()) >= 400 - stuck,
            timeout=30,
            what="the other messages, consumed while the call blocks",
        )
        queue_id, first = held
        committed = {mq.queue_id: o for mq, o in pc.offsets.snapshot().items()
                     if mq.topic == "PushBlock"}  # fmt: skip
        assert committed.get(queue_id, 0) <= first, (committed, held)
        gate.set()
        wait_for(lambda: set(sink.bodies()) == set(bodies), what="every message")
    assert "a new pull thread takes over" in caplog.text
