"""``END_TRANSACTION`` frames of one producer group from a prepared template.

A transaction producer sends one oneway ``END_TRANSACTION`` per transaction. Its JSON header
(RocketMQ's ``EndTransactionRequestHeader`` in ``extFields``) differs from the last one only
in its numbers and message id, so the frame is the template's text with those filled in:
the same bytes ``RemotingCommand.request(..., oneway=True).encode()`` writes (a test checks
it), without building a command and a dict and running the JSON encoder per call. A
producer with credentials signs each request over its final fields, so its frames are
built as commands.
"""

from __future__ import annotations

import json
import struct

from shmq.remoting.protocol import (
    FLAG_ONEWAY,
    RemotingCommand,
    RequestCode,
    SerializeType,
    next_opaque,
)
from shmq.remoting.security.credentials import Credentials

_LENGTHS = struct.Struct(">II")


def _json_text(value: str) -> str:
    """``value`` as a JSON string, as ``RemotingCommand`` writes it."""
    if value.isascii() and value.isalnum():
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


class EndFrames:
    """The ``END_TRANSACTION`` frames of producer group ``group``, signed with
    ``credentials`` when given."""

    def __init__(self, group: str, credentials: Credentials | None = None) -> None:
        self._group = group
        self._credentials = credentials
        self._head = (
            f'{{"code":{int(RequestCode.END_TRANSACTION)},"language":"PYTHON","version":0,"opaque":'
        )
        self._fields = (
            f',"flag":{FLAG_ONEWAY},"extFields":{{"producerGroup":{_json_text(group)},'
            f'"tranStateTableOffset":"'
        )
        self._tail = f'}},"serializeTypeCurrentRPC":"{SerializeType.JSON.name}"}}'

    def frame(
        self, queue_offset: int, commit_log_offset: int, kind: int, msg_id: str, from_check: bool
    ) -> bytes:
        """The oneway request ending the transaction of the half message at
        ``commit_log_offset`` (queue offset ``queue_offset``) with ``kind``
        (``commitOrRollback``); ``msg_id`` is its message (and transaction) id."""
        if self._credentials is not None:
            return self._signed(queue_offset, commit_log_offset, kind, msg_id, from_check)
        mid = _json_text(msg_id)
        header = (
            f'{self._head}{next_opaque()}{self._fields}{queue_offset}",'
            f'"commitLogOffset":"{commit_log_offset}","commitOrRollback":"{kind}",'
            f'"fromTransactionCheck":"{"true" if from_check else "false"}",'
            f'"msgId":{mid},"transactionId":{mid}{self._tail}'
        ).encode()
        return _LENGTHS.pack(4 + len(header), len(header)) + header

    def _signed(
        self, queue_offset: int, commit_log_offset: int, kind: int, msg_id: str, from_check: bool
    ) -> bytes:
        """The request ``frame`` writes, as a command, signed."""
        fields = {"producerGroup": self._group, "tranStateTableOffset": queue_offset,
                  "commitLogOffset": commit_log_offset, "commitOrRollback": kind,
                  "fromTransactionCheck": from_check, "msgId": msg_id,
                  "transactionId": msg_id}  # fmt: skip
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, fields, oneway=True)
        assert self._credentials is not None
        self._credentials.sign(request)
        return request.encode()
