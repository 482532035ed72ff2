"""``PullAccount``: what an answered pull tells the broker, merged per queue and carried in
one ``RELAY_PULLED`` from the data server (issue 53's data path, round trip of a pull)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shmq.broker.processors.pull_account import PullAccount
from shmq.remoting.codes import RequestCode
from shmq.remoting.protocol import RemotingCommand, decode_frame

offsets = st.none() | st.integers(0, 2**62)
accounts = st.builds(
    PullAccount, st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20),
    st.integers(0, 1023), st.none() | st.integers(0, 32), st.integers(0, 2**31), offsets,
    offsets,
)  # fmt: skip


@given(st.lists(accounts, max_size=8))
def test_accounts_cross_the_wire_as_they_were(sent):
    request = decode_frame(PullAccount.request(sent).encode()[4:])
    assert request.code == RequestCode.RELAY_PULLED and request.is_oneway
    assert PullAccount.all_of(request) == sent


@given(st.binary(max_size=200) | st.recursive(
    st.none() | st.integers() | st.text(max_size=5) | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=8), max_leaves=30,
).map(lambda v: json.dumps(v).encode()))  # fmt: skip
def test_a_malformed_relay_pulled_is_a_value_error(body):
    request = RemotingCommand.request(RequestCode.RELAY_PULLED, body=body, oneway=True)
    try:
        got = PullAccount.all_of(request)
    except ValueError:
        return
    assert all(isinstance(a, PullAccount) for a in got)


def test_pulls_of_a_queue_in_a_row_merge_as_applied_one_after_another():
    first = PullAccount("g", "T", 0, 3, 300, 10, 7)
    empty = PullAccount("g", "T", 0, None, 0, 10, None)  # found nothing, committed nothing
    later = PullAccount("g", "T", 0, 2, 200, 12, 10)
    assert first.merged(empty) == PullAccount("g", "T", 0, 3, 300, 10, 7)
    assert first.merged(empty).merged(later) == PullAccount("g", "T", 0, 5, 500, 12, 10)
    assert empty.merged(empty) == empty


@pytest.mark.parametrize("body", [b"[[1, 2]]", b'{"group": "g"}', b'[["g", "T", "x", 1, 1, 1, 1]]'])
def test_wrong_shapes_name_the_request(body):
    request = RemotingCommand.request(RequestCode.RELAY_PULLED, body=body, oneway=True)
    with pytest.raises(ValueError, match="RELAY_PULLED"):
        PullAccount.all_of(request)
