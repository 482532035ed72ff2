"""The receipt-handle decoder and the message checks take any text a client sends: a
handle decodes to the same handle or is INVALID_RECEIPT_HANDLE, a message is built or
refused with a RocketMQ code, nothing else escapes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shmq.pop_receipt import Receipt
from shmq.proxy.messages import outgoing
from shmq.proxy.proxy_config import ProxyConfig
from shmq.proxy.receipt_handle import decode_handle
from shmq.proxy.status import Code, ProxyError
from shmq.proxy.v2 import definition_pb2 as pb

_LONG = st.integers(0, (1 << 63) - 1)
_INT = st.integers(0, (1 << 31) - 1)


@given(st.text(max_size=600))
def test_any_text_decodes_or_is_invalid(text):
    try:
        handle = decode_handle(text)
    except ProxyError as exc:
        assert exc.code == Code.INVALID_RECEIPT_HANDLE
    else:
        assert decode_handle(handle.encode()) == handle


@given(_LONG, _LONG, _LONG, _INT, st.sampled_from("012"),
       st.from_regex(r"[a-zA-Z0-9_-]{1,40}", fullmatch=True), _INT, _LONG, _LONG)  # fmt: skip
def test_handles_round_trip(start, pop_time, invisible, revive, flag, broker, qid, off, clo):
    handle = Receipt(start, pop_time, invisible, revive, flag, broker, qid, off, clo)
    assert decode_handle(handle.encode()) == handle
    assert handle.extra_info.split(" ") == handle.encode().split(" ")[:8]


_TEXT = st.text(max_size=80)


@given(tag=_TEXT, keys=st.lists(_TEXT, max_size=3), message_id=_TEXT, group=_TEXT,
       props=st.dictionaries(_TEXT, _TEXT, max_size=4), body=st.binary(max_size=64),
       kind=st.sampled_from([pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]))  # fmt: skip
def test_any_message_is_built_or_refused_with_a_code(tag, keys, message_id, group, props, body,
                                                     kind):  # fmt: skip
    sp = pb.SystemProperties(tag=tag, keys=keys, message_id=message_id, message_group=group,
                             message_type=kind)  # fmt: skip
    message = pb.Message(topic=pb.Resource(name="T"), user_properties=props,
                         system_properties=sp, body=body)  # fmt: skip
    try:
        out = outgoing(message, "T", "127.0.0.1:1", ProxyConfig())
    except ProxyError as exc:
        assert 40000 <= exc.code < 50000
    else:
        encoded = out.encoded_properties()
        pairs = [p for p in encoded.split("\x02") if p]
        assert all(p.count("\x01") == 1 for p in pairs)  # no value breaks the framing
        assert out.properties["UNIQ_KEY"] == message_id
