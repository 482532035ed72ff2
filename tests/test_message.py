"""Message values: properties encoding, ids, topic rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmq.errors import InvalidMessageIdError, InvalidTopicError
from shmq.message import (
    offset_msg_id,
    pack_host,
    parse_offset_msg_id,
    validate_topic,
)
from shmq.properties import build_properties, decode_properties

names = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: not s.isspace())
values = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: not s.isspace())


def test_properties_match_rocketmq_encoding():
    raw = build_properties("TagA", ["k1", "k2"], {"color": "red"})
    assert raw == b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02color\x01red\x02"
    assert decode_properties(raw) == {"TAGS": "TagA", "KEYS": "k1 k2", "color": "red"}


def test_decoder_follows_rocketmq_rules():
    # segments shorter than 3 chars, with no name, or with an empty value are dropped
    assert decode_properties(b"a\x01\x02\x01b\x02ab\x02x\x01y\x02") == {"x": "y"}


@given(st.dictionaries(names, values, max_size=8))
def test_user_properties_round_trip(props):
    from shmq.properties import RESERVED_PROPERTY_NAMES

    props = {k: v for k, v in props.items() if k not in RESERVED_PROPERTY_NAMES}
    assert decode_properties(build_properties(properties=props)) == props


def test_offset_msg_id_matches_the_spec_example():
    host = pack_host("192.168.0.10", 10911).to_bytes(8, "big", signed=True)
    assert offset_msg_id(host, 0) == "C0A8000A00002A9F0000000000000000"
    assert parse_offset_msg_id("C0A8000A00002A9F0000000000000400") == ("192.168.0.10:10911", 1024)
    for bad in ("", "C0A8", "G" * 32, None):
        with pytest.raises(InvalidMessageIdError):
            parse_offset_msg_id(bad)  # type: ignore[arg-type]


def test_topic_rule():
    assert validate_topic("%RETRY%group_1-x|y") == b"%RETRY%group_1-x|y"
    with pytest.raises(InvalidTopicError, match="length 128, at most 127"):
        validate_topic("t" * 128)


@given(st.binary(max_size=200))
def test_decode_properties_never_raises(raw):
    props = decode_properties(raw)
    assert all(k and v for k, v in props.items())


@given(st.text(max_size=64))
def test_parse_offset_msg_id_accepts_or_names_the_problem(text):
    try:
        host, offset = parse_offset_msg_id(text)
    except InvalidMessageIdError as exc:
        assert repr(text)[:20] in str(exc) or "hex" in str(exc)
    else:
        assert len(text) in (32, 56) and ":" in host and isinstance(offset, int)


def test_delay_level_is_the_delay_property():
    from shmq.errors import InvalidMessageError
    from shmq.message import Message

    plain = Message("T", "x", tags="A")
    assert plain.delay_level == 0
    assert "DELAY" not in decode_properties(plain.encoded_properties("K"))
    delayed = Message("T", "x", tags="A", delay_level=3)
    props = decode_properties(delayed.encoded_properties("K"))
    assert props == {"TAGS": "A", "DELAY": "3", "UNIQ_KEY": "K"}
    assert "delay_level=3" in repr(delayed)
    delayed.delay_level = 18  # the last of messageDelayLevel's 18 levels
    assert decode_properties(delayed.encoded_properties())["DELAY"] == "18"
    for bad in (19, -1):
        with pytest.raises(InvalidMessageError, match=f"delay_level {bad} is out of range"):
            Message("T", "x", delay_level=bad)
    for bad in (True, "3", 2.0):
        with pytest.raises(InvalidMessageError, match="must be an int"):
            delayed.delay_level = bad  # type: ignore[assignment]
    assert delayed.delay_level == 18
    with pytest.raises(InvalidMessageError, match="reserved"):  # set delay_level instead
        Message("T", "x", properties={"DELAY": "2"}).encoded_properties()
