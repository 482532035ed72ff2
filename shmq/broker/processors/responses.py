"""Response bodies the processors share: RocketMQ's JSON (``RemotingCommand.body_json``)
and fastjson's, whose object maps may have non-string keys (``MessageQueue`` objects, bare
queue ids) that only fastjson reads back."""

from __future__ import annotations

from typing import Any

from shmq.remoting import fastjson
from shmq.remoting.protocol import RemotingCommand


def json_response(request: RemotingCommand, obj: Any) -> RemotingCommand:
    """SUCCESS with ``obj`` as the JSON body."""
    return RemotingCommand.response_to(request, body=RemotingCommand.body_json(obj))


def fastjson_response(request: RemotingCommand, obj: Any) -> RemotingCommand:
    """SUCCESS with ``obj`` as the body, written as fastjson writes it."""
    return RemotingCommand.response_to(request, body=fastjson.dumps(obj).encode())
