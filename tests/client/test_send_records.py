"""The single-message encoder (one ``struct.pack_into`` per record, ``RingProducer.append_one``)
against the independent decoder and against the bulk encoder (``encode_batch``) on a real
producer ring in this process: every field of every record the same."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.client.producer.records import (
    RecordBatch,
    TopicRecords,
    UniqKeys,
    half_record,
    one_record,
    placed,
    retried_record,
)
from shmq.client.producer.ring import RingProducer
from shmq.delay_topics import SCHEDULE_TOPIC
from shmq.errors import InvalidMessageError
from shmq.half_messages import HALF_TOPIC
from shmq.ipc import counters as cn
from shmq.ipc import registry as rg
from shmq.ipc import ring
from shmq.ipc.segment import Segment, create_semaphore, new_prefix, unlink_prefix
from shmq.message import Message, MessageExt, pack_host
from shmq.properties import RESERVED_PROPERTY_NAMES
from spec_decoder import decode_record

CAPACITY, SLOTS = 1 << 20, 1024


@pytest.fixture(scope="module")
def rp():
    """A producer ring with its counters and registry, as a broker creates them, and the
    producer's side of it (no writer: the test frees the ring itself)."""
    prefix = new_prefix()
    made = []
    try:
        seg = Segment.create(prefix + ".ring", ring.segment_size(CAPACITY, SLOTS))
        counters = Segment.create(prefix + ".counters", cn.SIZE)
        registry = Segment.create(prefix + ".registry", rg.segment_size(1, 1))
        made += [seg, counters, registry]
        ring.init(seg.words, CAPACITY, SLOTS)
        cn.init(counters.words, os.getpid(), 0)
        rg.init(registry.words, 1, 1)
        for name in (".sem", ".writer"):
            create_semaphore(prefix + name).close()
        info = {"ring": seg.name, "sem": prefix + ".sem", "writerSem": prefix + ".writer",
                "slot": 0, "maxMessageSize": CAPACITY // 2, "checkProducerCrc": True}  # fmt: skip
        producer = RingProducer(info, counters, registry)
        yield producer
        producer.close()
    finally:
        for s in made:
            s.close()
        unlink_prefix(prefix)


def free(rp: RingProducer) -> None:
    """Play the writer: everything published is consumed."""
    ring.publish_head(rp.words, rp.tail, rp.seq)


def decoded(rp: RingProducer, size: int) -> dict:
    """The record of ``size`` bytes the last append wrote (it ends at the tail), by the
    independent decoder (CRC checked)."""
    start = rp.tail - size
    local = start & (CAPACITY - 1)
    record = decode_record(rp.data.tobytes(), local, start - local)
    assert record is not None, "the independent decoder refuses the record"
    return record


text = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF,
                            exclude_categories=("Zs", "Zl", "Zp", "Cc")),
               min_size=1, max_size=12)  # fmt: skip
messages = st.builds(
    lambda topic, body, tags, keys, props, delay, flag: Message(
        topic, body, tags=tags, keys=keys, properties=props, delay_level=delay, flag=flag
    ),
    st.from_regex(r"[A-Za-z0-9_%|-]{1,127}", fullmatch=True),
    st.binary(min_size=1, max_size=3000),
    st.none() | text,
    st.lists(text, max_size=3),
    st.dictionaries(text.filter(lambda n: n not in RESERVED_PROPERTY_NAMES), text, max_size=3),
    st.just(0),  # delayed messages: test_a_delayed_message_is_stored_in_the_schedule_topic
    st.integers(-(2**31), 2**31 - 1),
)


@settings(max_examples=150, deadline=None)
@given(msg=messages, queue_id=st.integers(0, 1023), port=st.integers(1, 65535))
def test_the_single_message_encoder_writes_what_the_bulk_encoder_writes(rp, msg, queue_id, port):
    uniq_keys = UniqKeys()
    born_host = pack_host("10.1.2.3", port)
    one = one_record(TopicRecords(msg.topic, msg.topic.encode()), msg, msg.body, uniq_keys)
    free(rp)
    rp.append_one(one, queue_id, born_host, time.monotonic() + 5)
    single = decoded(rp, one[1])

    batch = RecordBatch(msg.topic, msg.topic.encode(), [msg], [one[-1].decode()])
    fields = batch.fields(queue_id, born_host)
    fields["born_ts"] = one[4]  # the same born time
    free(rp)
    _, sizes = rp.append(batch.topic_raw, batch.bodies, batch.body_offs, batch.props,
                         batch.props_offs, fields, time.monotonic() + 5)  # fmt: skip
    bulk = decoded(rp, int(sizes[0]))

    assert single.pop("phys") != bulk.pop("phys")  # each at its own ring position
    single.pop("offset_msg_id"), bulk.pop("offset_msg_id")
    assert single == bulk
    assert single["body"] == msg.body and single["topic"] == msg.topic
    assert (single["queue_id"], single["flag"], single["born_timestamp"]) == (
        queue_id, msg.flag, one[4])  # fmt: skip
    props = single["properties"]
    assert props["UNIQ_KEY"] == one[-1].decode()
    assert props.get("TAGS") == msg.tags
    assert "DELAY" not in props
    assert props.get("KEYS", "") == " ".join(msg.keys)
    for name, value in msg.properties.items():
        assert props[name] == value


@settings(max_examples=60, deadline=None)
@given(msg=messages, level=st.integers(1, 18), levels=st.integers(1, 18),
       queue_id=st.integers(0, 1023))  # fmt: skip
def test_a_delayed_message_is_stored_in_the_schedule_topic(rp, msg, level, levels, queue_id):
    """As RocketMQ's broker stores it: the schedule topic's queue for the level (capped at
    the broker's last one), the real topic and queue in REAL_TOPIC / REAL_QID."""
    msg.delay_level = level
    one = one_record(TopicRecords(msg.topic, msg.topic.encode()), msg, msg.body, UniqKeys())
    record, schedule_qid, _ = placed(one, queue_id, levels, 3 * 86_400_000)
    free(rp)
    rp.append_one(record, schedule_qid, 0, time.monotonic() + 5)
    stored = decoded(rp, record[1])
    assert stored["topic"] == SCHEDULE_TOPIC
    assert stored["queue_id"] == schedule_qid == min(level, levels) - 1
    assert stored["body"] == msg.body
    props = stored["properties"]
    assert props["REAL_TOPIC"] == msg.topic
    assert props["REAL_QID"] == str(queue_id)
    assert props["DELAY"] == str(min(level, levels))
    assert props["UNIQ_KEY"] == one[-1].decode()
    assert props.get("TAGS") == msg.tags


@settings(max_examples=30, deadline=None)
@given(msg=messages, queue_id=st.integers(0, 1023))
def test_a_half_message_is_stored_in_the_half_topic_queue_0(rp, msg, queue_id):
    """As RocketMQ's broker stores a transaction's half message: sysflag 0 (NOT), the half
    topic's queue 0, real topic and queue, TRAN_MSG and the producer group."""
    one = half_record(one_record(TopicRecords(msg.topic, msg.topic.encode()), msg, msg.body,
                                 UniqKeys()), msg, "TxGroup")  # fmt: skip
    record, half_qid, _ = placed(one, queue_id, 18, 3 * 86_400_000)
    free(rp)
    rp.append_one(record, half_qid, 0, time.monotonic() + 5)
    stored = decoded(rp, record[1])
    assert (stored["topic"], stored["queue_id"], stored["sysflag"]) == (HALF_TOPIC, 0, 0)
    assert stored["body"] == msg.body
    props = stored["properties"]
    assert (props["REAL_TOPIC"], props["REAL_QID"]) == (msg.topic, str(queue_id))
    assert (props["TRAN_MSG"], props["PGROUP"]) == ("true", "TxGroup")
    assert props["UNIQ_KEY"] == one[-1].decode()
    assert props.get("TAGS") == msg.tags


def test_records_that_do_not_fit_the_rest_of_a_lap_start_the_next_one(rp):
    """A record never wraps: the lap is closed with a blank record and the record starts at
    the ring's beginning, where the decoder finds it."""
    uniq_keys = UniqKeys()
    topic = TopicRecords("Laps", b"Laps")
    body = bytes(range(256)) * 100
    seen = 0
    for i in range(2 * CAPACITY // len(body)):
        free(rp)
        one = one_record(topic, Message("Laps", body, flag=i), body, uniq_keys)
        rp.append_one(one, 0, 0, time.monotonic() + 5)
        record = decoded(rp, one[1])
        assert (record["body"], record["flag"]) == (body, i)
        seen += 1
    assert rp.tail > CAPACITY and seen


def test_timer_messages_out_of_range_are_refused_with_a_clear_error():
    with pytest.raises(InvalidMessageError, match="negative"):
        Message("T", b"x", deliver_time_ms=-5)
    with pytest.raises(InvalidMessageError, match="not both"):
        Message("T", b"x", delay_level=2, deliver_time_ms=1)
    with pytest.raises(InvalidMessageError, match="out of range"):
        Message("T", b"x", delay_level=-1)
    far = int(time.time() * 1000) + 3 * 86_400_000 + 60_000
    msg = Message("T", b"x", deliver_time_ms=far)
    one = one_record(TopicRecords("T", b"T"), msg, msg.body, UniqKeys())
    with pytest.raises(InvalidMessageError, match="beyond the broker's timerMaxDelaySec 259200"):
        placed(one, 0, 18, 3 * 86_400_000)


def test_a_timer_message_goes_to_the_timer_topic_and_a_past_one_is_ordinary(rp):
    soon = int(time.time() * 1000) + 60_000
    for at, topic, qid in ((soon, "rmq_sys_wheel_timer", 0), (1, "Plain", 5)):
        msg = Message("Plain", b"tick", deliver_time_ms=at)
        one = one_record(TopicRecords("Plain", b"Plain"), msg, msg.body, UniqKeys())
        record, queue_id, _ = placed(one, 5, 18, 3 * 86_400_000)
        free(rp)
        rp.append_one(record, queue_id, 0, time.monotonic() + 5)
        stored = decoded(rp, record[1])
        assert (stored["topic"], stored["queue_id"]) == (topic, qid)
        assert stored["properties"]["TIMER_DELIVER_MS"] == str(at)
        if at == soon:
            props = stored["properties"]
            assert (props["REAL_TOPIC"], props["REAL_QID"], props["TIMER_OUT_MS"]) == (
                "Plain", "5", str(soon))  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(reconsume=st.integers(0, 20), max_times=st.integers(1, 16), level=st.integers(1, 18),
       queue_id=st.integers(0, 7))  # fmt: skip
def test_a_resent_message_is_stored_as_a_send_to_the_retry_topic(
    rp, reconsume, max_times, level, queue_id
):
    """A consumer's resend to %RETRY%<group> (``retried_record``) as RocketMQ's broker
    stores such a send: delayed by its level, or in the DLQ once its reconsume times reach
    the maximum; RECONSUMETIMES one more, the user's properties and unique key kept."""
    props = b"TAGS\x01t\x02UNIQ_KEY\x01ABC\x02DELAY\x013\x02REAL_TOPIC\x01X\x02REAL_QID\x011\x02"
    consumed = MessageExt("Orders", 0, 7, 100, b"payload", props, 1, 2, b"\0" * 8, b"\0" * 8,
                          reconsume_times=reconsume)  # fmt: skip
    one = retried_record(consumed, "%RETRY%g", level, max_times)
    record, qid, stored_reconsume = placed(one, queue_id, 18, 3 * 86_400_000)
    free(rp)
    rp.append_one(record, qid, 0, time.monotonic() + 5, stored_reconsume)
    stored = decoded(rp, record[1])
    assert stored["reconsume_times"] == stored_reconsume == reconsume + 1
    got = stored["properties"]
    assert (got["TAGS"], got["UNIQ_KEY"], got["RETRY_TOPIC"], got["ORIGIN_MESSAGE_ID"]) == (
        "t", "ABC", "Orders", "ABC")  # fmt: skip
    if reconsume + 1 >= max_times:
        assert (stored["topic"], stored["queue_id"]) == ("%DLQ%g", 0)
        assert not {"REAL_TOPIC", "REAL_QID", "DELAY"} & set(got)
    else:
        assert (stored["topic"], stored["queue_id"]) == (SCHEDULE_TOPIC, level - 1)
        assert (got["REAL_TOPIC"], got["REAL_QID"], got["DELAY"]) == (
            "%RETRY%g", str(queue_id), str(level))  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(first=st.integers(0, 4 * SLOTS), count=st.integers(1, SLOTS))
def test_a_run_of_answers_reads_what_one_by_one_reads(rp, first, count):
    """The completion thread reads a run of async answers in one copy, also across the end
    of the completion slots; each equals the record's own read."""
    rp.completions[:] = np.arange(SLOTS * 4, dtype=np.int64).reshape(SLOTS, 4) * 7 - 3
    one_by_one = [list(rp.answer_words(s)) for s in range(first, first + count)]
    assert rp.answer_run(first, count) == one_by_one
