"""Kafka source option parity (issue 57), without Spark: the timestamp and trigger options
parse as Spark's Kafka source reads them, are refused naming the option when bad or given
to the wrong kind of query, and the planning rules (timestamp precedence, holding a
micro-batch for ``minOffsetsPerTrigger``) behave as Kafka's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import ConfigError
from shmq.spark import planning
from shmq.spark.options import (
    DEFAULT_MAX_TRIGGER_DELAY_MS,
    parse_duration_ms,
    parse_read_options,
    parse_timestamps,
)

BASE = {"store": "/nowhere", "topic": "T"}


def _stream(**options: str):
    return parse_read_options({**BASE, **options}, streaming=True)


def _batch(**options: str):
    return parse_read_options({**BASE, **options}, streaming=False)


def test_defaults_follow_kafka():
    stream = _stream()
    assert stream.min_offsets_per_trigger is None
    assert stream.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 15 * 60 * 1000
    assert stream.starting_timestamp_strategy == "error"
    batch = _batch()
    assert batch.starting_by_timestamp is batch.ending_by_timestamp is None
    assert batch.ending_timestamp is None


def test_trigger_options_parse():
    opts = _stream(minOffsetsPerTrigger="100", maxOffsetsPerTrigger="500", maxTriggerDelay="30s")
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger) == (100, 500)
    assert opts.max_trigger_delay_ms == 30_000
    assert _stream(minOffsetsPerTrigger="5", maxOffsetsPerTrigger="5").min_offsets_per_trigger == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger must be in"),
        ({"minOffsetsPerTrigger": "lots"}, "minOffsetsPerTrigger must be an integer"),
        ({"minOffsetsPerTrigger": "6", "maxOffsetsPerTrigger": "5"}, r"must not exceed"),
        ({"maxTriggerDelay": "5m"}, "maxTriggerDelay only applies with option minOffsetsPer"),
        ({"minOffsetsPerTrigger": "1", "maxTriggerDelay": "5 parsecs"}, "maxTriggerDelay must"),
        ({"minOffsetsPerTrigger": "1", "maxTriggerDelay": "-1s"}, "maxTriggerDelay must"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "ByTimestampStrategy must be"),
        ({"startingOffsetsByTimestamp": '{"T": {"0": -1}}'}, r"timestamp -1 of T queue 0"),
        ({"startingOffsetsByTimestamp": '{"U": {"0": 5}}'}, "not subscribed: U"),
        ({"endingTimestamp": "5"}, "endingTimestamp is for batch queries only"),
        ({"endingOffsetsByTimestamp": '{"T": {"0": 5}}'}, "endingOffsetsByTimestamp is for"),
    ],
)
def test_bad_stream_options_name_the_option(options, message):
    with pytest.raises(ConfigError, match=message):
        _stream(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"minOffsetsPerTrigger": "10"}, "minOffsetsPerTrigger is for streaming queries only"),
        ({"maxTriggerDelay": "1m"}, "maxTriggerDelay is for streaming queries only"),
        ({"maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger is for streaming queries only"),
        ({"endingTimestamp": "soon"}, "endingTimestamp must be an integer"),
        ({"endingOffsetsByTimestamp": '{"T": {"0": 1.5}}'}, "endingOffsetsByTimestamp: times"),
        ({"endingOffsetsByTimestamp": '{"U": {"0": 5}}'}, "endingOffsetsByTimestamp names top"),
        ({"startingOffsetsByTimestamp": "[]"}, "startingOffsetsByTimestamp: the JSON must be"),
    ],
)
def test_bad_batch_options_name_the_option(options, message):
    with pytest.raises(ConfigError, match=message):
        _batch(**options)


def test_timestamp_options_parse():
    opts = _batch(
        startingOffsetsByTimestamp='{"T": {"0": 1000, "3": 2000}}',
        startingOffsetsByTimestampStrategy=" Latest ",
        endingTimestamp="5000",
        endingOffsetsByTimestamp='{"T": {"1": 4000}}',
    )
    assert opts.starting_by_timestamp == {"T": {0: 1000, 3: 2000}}
    assert opts.starting_timestamp_strategy == "latest"
    assert opts.ending_timestamp == 5000
    assert opts.ending_by_timestamp == {"T": {1: 4000}}


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("2min", 120_000), ("30s", 30_000), ("250", 250), ("250ms", 250),
     ("1h", 3_600_000), ("1d", 86_400_000), (" 3 S ", 3000), ("1500us", 1), ("0", 0)],
)  # fmt: skip
def test_durations_read_as_spark_time_strings(text, ms):
    assert parse_duration_ms(text, "maxTriggerDelay", 7) == ms


def test_absent_duration_is_the_default():
    assert parse_duration_ms(None, "maxTriggerDelay", 7) == 7


@settings(deadline=None, max_examples=300)
@given(st.text(max_size=12))
def test_any_duration_text_parses_or_names_the_option(text):
    try:
        ms = parse_duration_ms(text, "maxTriggerDelay", 7)
    except ConfigError as exc:
        assert "maxTriggerDelay" in str(exc)
    else:
        assert ms >= 0


@settings(deadline=None)
@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True),
        st.dictionaries(st.integers(0, 1000), st.integers(0, (1 << 63) - 1), max_size=4),
        max_size=3,
    )
)
def test_timestamps_json_round_trips(value):
    text = json.dumps({t: {str(q): ms for q, ms in qs.items()} for t, qs in value.items()})
    assert parse_timestamps(text, "startingOffsetsByTimestamp") == value


def test_global_timestamp_wins_over_per_queue_ones():
    queues = [("T", 0), ("T", 1), ("T", 2)]
    per_queue = {"T": {0: 10, 1: 20}, "U": {0: 30}}
    assert planning.queue_timestamps(queues, 99, per_queue) == dict.fromkeys(queues, 99)
    assert planning.queue_timestamps(queues, None, per_queue) == {("T", 0): 10, ("T", 1): 20}
    assert planning.queue_timestamps(queues, None, None) == {}


def test_pinned_offsets_win_over_offset_options():
    bounds = {("T", 0): (5, 50), ("T", 1): (0, 40), ("T", 2): (0, 30)}
    starts = planning.resolve(
        {"T": {0: 7, 1: 9}}, bounds, default=planning.EARLIEST, pinned={("T", 1): 33}
    )
    assert starts == {("T", 0): 7, ("T", 1): 33, ("T", 2): 0}
    ends = planning.resolve("latest", bounds, default=planning.LATEST, pinned={("T", 2): 12})
    assert ends == {("T", 0): 50, ("T", 1): 40, ("T", 2): 12}


@settings(deadline=None)
@given(
    st.integers(0, 10_000),
    st.one_of(st.none(), st.integers(1, 10_000)),
    st.floats(0, 1e7, allow_nan=False),
    st.integers(0, 10**7),
)
def test_a_trigger_holds_only_below_the_minimum_and_within_the_delay(
    new_rows, min_rows, waited_ms, max_delay_ms
):
    held = planning.holds(new_rows, min_rows, waited_ms, max_delay_ms)
    if min_rows is None or new_rows >= min_rows or waited_ms >= max_delay_ms:
        assert not held
    else:
        assert held


def test_lags_count_unread_offsets_per_queue():
    start = {("T", 0): 10, ("T", 1): 50}
    latest = {("T", 0): 25, ("T", 1): 40, ("T", 2): 7}
    assert planning.lags(start, latest) == {("T", 0): 15, ("T", 1): 0, ("T", 2): 7}
