"""The option and offset parsers and the offset arithmetic, fuzzed (no Spark needed)."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.errors import ConfigError
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions
from shmq.spark import planning
from shmq.spark.options import (
    offsets_from_json,
    offsets_to_json,
    parse_offsets,
    parse_read_options,
    parse_tags,
    parse_write_options,
)

topics = st.from_regex(r"[A-Za-z0-9_%|-]{1,20}", fullmatch=True)
offsets = st.dictionaries(
    topics,
    st.dictionaries(st.integers(0, 1 << 31 - 1), st.integers(-2, 1 << 62), max_size=5),
    max_size=4,
)


@settings(deadline=None)
@given(offsets)
def test_offsets_json_round_trips(value):
    text = json.dumps(offsets_to_json(value))
    assert parse_offsets(text, "startingOffsets", default="earliest") == value
    checkpointed = {t: {q: o for q, o in qs.items() if o >= 0} for t, qs in value.items()}
    assert offsets_from_json(json.loads(json.dumps(offsets_to_json(checkpointed)))) == checkpointed


@settings(deadline=None, max_examples=300)
@given(st.one_of(st.text(max_size=60), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
).map(json.dumps)))  # fmt: skip
def test_any_offsets_text_parses_or_names_the_option(text):
    try:
        parsed = parse_offsets(text, "endingOffsets", default="latest", allow_earliest=False)
    except ConfigError as exc:
        assert "endingOffsets" in str(exc)
        return
    if isinstance(parsed, dict):
        for queues in parsed.values():
            assert all(q >= 0 and o >= -1 for q, o in queues.items())
    else:
        assert parsed == "latest"


def test_offsets_rules():
    assert parse_offsets(" Earliest ", "s", default="latest") == "earliest"
    with pytest.raises(ConfigError, match="endingOffsets: -2"):
        parse_offsets('{"T": {"0": -2}}', "endingOffsets", default="latest", allow_earliest=False)
    for bad in ('{"T": {"x": 1}}', '{"T": {"0": 1.5}}', '{"T": [1]}', '{"b@d": {}}', "[]", "{"):
        with pytest.raises(ConfigError, match="startingOffsets"):
            parse_offsets(bad, "startingOffsets", default="earliest")


@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(["topic", "topics", "topicPattern", "tags",
                                        "maxOffsetsPerTrigger", "failOnDataLoss",
                                        "startingOffsets", "minPartitions", "store"]),
                       st.text(max_size=12), max_size=6))  # fmt: skip
def test_read_options_fail_only_with_config_errors(options):
    for streaming in (False, True):
        try:
            opts = parse_read_options(options, streaming=streaming)
        except ConfigError:
            continue
        assert opts.store and (opts.topics or opts.topic_pattern is not None)


def test_read_option_errors_name_the_option():
    base = {"store": "/s", "topic": "T"}
    cases = {
        "maxOffsetsPerTrigger": "0",
        "failOnDataLoss": "maybe",
        "minPartitions": "x",
        "startingTimestamp": "-5",
    }
    for name, value in cases.items():
        with pytest.raises(ConfigError, match=name):
            parse_read_options({**base, name: value}, streaming=True)
    with pytest.raises(ConfigError, match="exactly one of"):
        parse_read_options({"store": "/s", "topic": "T", "topics": "A,B"}, streaming=False)
    with pytest.raises(ConfigError, match=r"store .* or namesrv"):
        parse_read_options({"topic": "T"}, streaming=False)
    with pytest.raises(ConfigError, match="not subscribed: U"):
        parse_read_options({**base, "startingOffsets": '{"U": {"0": 1}}'}, streaming=False)
    with pytest.raises(ConfigError, match="'latest' is not allowed"):
        parse_read_options({**base, "startingOffsets": "latest"}, streaming=False)
    with pytest.raises(ConfigError, match="unknown read option 'tag'"):
        parse_read_options({**base, "tag": "A"}, streaming=False)
    with pytest.raises(ConfigError, match="namesrv"):
        parse_write_options({"topic": "T"})
    assert parse_tags("A || B") == {"A", "B"} and parse_tags(" * ") is None
    with pytest.raises(ConfigError, match="tags"):
        parse_tags("A ||")


def test_credentials_and_tls_options_read_and_write():
    given = {"namesrv": "h:9876", "topic": "T", "ACCESSKEY": "AK", "secretKey": "SK",
             "tls": "true"}  # fmt: skip
    for opts in (parse_read_options(given, streaming=True), parse_write_options(given)):
        assert opts.credentials == Credentials("AK", "SK") and opts.tls == TlsOptions()
        assert "SK" not in repr(opts)
    opts = parse_write_options({"namesrv": "h:1", "tlsCa": "/ca.pem"})
    assert opts.credentials is None and opts.tls == TlsOptions(ca_file="/ca.pem")
    assert parse_write_options({"namesrv": "h:1", "tls": "false"}).tls is None
    with pytest.raises(ConfigError, match="accessKey and secretKey"):
        parse_write_options({"namesrv": "h:1", "accessKey": "AK"})
    with pytest.raises(ConfigError, match="option tls must be true or false"):
        parse_read_options({"store": "/s", "topic": "T", "tls": "yes"}, streaming=False)


queue = st.tuples(st.sampled_from(["A", "B"]), st.integers(0, 5))


@settings(deadline=None)
@given(st.dictionaries(queue, st.tuples(st.integers(0, 1000), st.integers(0, 5000)), min_size=1),
       st.integers(1, 3000))  # fmt: skip
def test_cap_shares_the_budget(lags, max_rows):
    start = {q: s for q, (s, _) in lags.items()}
    latest = {q: s + n for q, (s, n) in lags.items()}
    end = planning.cap(start, latest, max_rows)
    assert set(end) == set(latest)
    assert all(start[q] <= end[q] <= latest[q] for q in latest)
    admitted = sum(end[q] - start[q] for q in latest)
    assert admitted == min(max_rows, sum(latest[q] - start[q] for q in latest))


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**5)), max_size=6),
       st.integers(1, 10**5), st.none() | st.integers(1, 64))  # fmt: skip
def test_split_covers_each_range_exactly(spans, max_rows, min_partitions):
    ranges = [planning.QueueRange("T", i, s, s + n) for i, (s, n) in enumerate(spans) if n]
    pieces = planning.split(ranges, max_rows, min_partitions)
    for r in ranges:
        mine = [p for p in pieces if p.queue_id == r.queue_id]
        assert mine[0].start == r.start and mine[-1].end == r.end
        assert all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(0 < p.end - p.start <= max_rows for p in mine)
    if min_partitions:
        assert len(pieces) >= min(min_partitions, sum(r.end - r.start for r in ranges))


def test_batch_ranges_data_loss_and_order():
    bounds = {("T", 0): (10, 100), ("T", 1): (0, 50)}
    with pytest.raises(Exception, match=r"T queue 0: offsets \[5, 10\)"):
        planning.batch_ranges({("T", 0): 5, ("T", 1): 0}, {("T", 0): 100, ("T", 1): 50},
                              bounds, True, [("T", 0)])  # fmt: skip
    got = planning.batch_ranges({("T", 0): 5, ("T", 1): 0}, {("T", 0): 500, ("T", 1): 50},
                                bounds, False, [("T", 0)])  # fmt: skip
    assert got == [planning.QueueRange("T", 0, 10, 100), planning.QueueRange("T", 1, 0, 50)]
