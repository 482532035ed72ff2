"""A broker's configuration as mqadmin ``getBrokerConfig`` reads it: GET_BROKER_CONFIG's
properties text, every broker and store key under RocketMQ's names."""

from __future__ import annotations

from shmq.errors import ResponseError
from shmq.java_properties import parse_properties
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, check_response


def broker_configs(
    client: RemotingClient, targets: list[tuple[str, str]]
) -> dict[str, dict[str, str]]:
    """``{broker name: {key: value}}`` of each ``(name, address)`` in ``targets``."""
    out = {}
    for name, addr in targets:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CONFIG)
        try:
            response = check_response(client.invoke(addr, request))
        except ResponseError as exc:
            raise ResponseError(exc.code, f"broker {name} ({addr}): {exc.remark}") from None
        out[name] = parse_properties(bytes(response.body).decode())
    return out
