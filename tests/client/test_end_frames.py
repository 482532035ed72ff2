"""The prepared END_TRANSACTION frames write what ``RemotingCommand`` writes, and the
broker's decoder reads back the fields."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shmq.client.transaction.end_frames import EndFrames
from shmq.remoting.protocol import RemotingCommand, RequestCode, decode_frame

offsets = st.integers(0, 2**63 - 1)
texts = st.text(min_size=1, max_size=40)


@given(texts, offsets, offsets, st.sampled_from([0, 8, 12]), texts, st.booleans())
def test_the_template_writes_the_commands_bytes(group, qoff, offset, kind, msg_id, check):
    frame = EndFrames(group).frame(qoff, offset, kind, msg_id, check)
    decoded = decode_frame(frame[4:])
    fields = {"producerGroup": group, "tranStateTableOffset": qoff, "commitLogOffset": offset,
              "commitOrRollback": kind, "fromTransactionCheck": check, "msgId": msg_id,
              "transactionId": msg_id}  # fmt: skip
    expected = RemotingCommand.request(RequestCode.END_TRANSACTION, fields, oneway=True)
    expected.opaque = decoded.opaque  # the next request id, the one thing left to compare
    assert frame == expected.encode()
    assert decoded.is_oneway and decoded.ext_fields == expected.ext_fields
