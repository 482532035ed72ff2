"""The recall-handle decoder takes any text a client sends: it decodes to a handle, or it is
RocketMQ's "recall handle is invalid", nothing else escapes; handles round-trip, padding is
optional and only the URL-safe alphabet is Base64, as Java's URL decoder has it."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmq.recall_handle import INVALID, InvalidRecallHandleError, RecallHandle

# a field: any text but a space (the separator) or a lone surrogate (no UTF-8 for it)
_FIELD = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)))


@given(st.text(max_size=300))
def test_any_text_decodes_or_is_invalid(text):
    try:
        handle = RecallHandle.decode(text)
    except InvalidRecallHandleError as exc:
        assert str(exc) == INVALID
    else:
        assert RecallHandle.decode(handle.encode()) == handle


@given(st.binary(max_size=200))
def test_any_bytes_in_the_url_safe_alphabet_decode_alike_with_or_without_padding(data):
    padded = base64.urlsafe_b64encode(data).decode()
    outcomes = []
    for text in (padded, padded.rstrip("=")):
        try:
            outcomes.append(RecallHandle.decode(text))
        except InvalidRecallHandleError:
            outcomes.append(None)
    assert outcomes[0] == outcomes[1]
    if b"+" not in base64.b64encode(data) and b"/" not in base64.b64encode(data):
        return
    with pytest.raises(InvalidRecallHandleError):  # the standard alphabet's two are not
        RecallHandle.decode(base64.b64encode(data).decode())


@given(_FIELD, _FIELD, _FIELD, _FIELD.filter(bool), st.lists(_FIELD, max_size=3))
def test_handles_round_trip_and_fields_past_the_fifth_are_ignored(topic, broker, at, uniq, more):
    handle = RecallHandle(topic, broker, at, uniq)
    assert RecallHandle.decode(handle.encode()) == handle
    longer = " ".join(("v1", topic, broker, at, uniq, *more)).encode()
    assert RecallHandle.decode(base64.urlsafe_b64encode(longer).decode()) == handle


@pytest.mark.parametrize(
    "raw",
    [b"", b"v1", b"v1 t b 1", b"v1 t b 1 ", b"v2 t b 1 id", b"V1 t b 1 id", b"\xff t b 1 id"],
)
def test_rocketmqs_invalid_handles(raw):
    with pytest.raises(InvalidRecallHandleError, match=INVALID):
        RecallHandle.decode(base64.urlsafe_b64encode(raw).decode())


def test_a_timer_messages_handle_is_rocketmqs():
    handle = RecallHandle.for_timer("TopicA", "broker-a", 1_700_000_000_000, "ID1")
    assert base64.urlsafe_b64decode(handle.encode()) == b"v1 TopicA broker-a 1700000000001 ID1"
