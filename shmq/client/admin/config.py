"""A broker's configuration as mqadmin reads and changes it: GET_BROKER_CONFIG's properties
text (every broker and store key under RocketMQ's names) and UPDATE_BROKER_CONFIG."""

from __future__ import annotations

from shmq.errors import ResponseError
from shmq.java_properties import escape, parse_properties
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, check_response


class BrokerConfigs:
    """The config calls of ``Admin`` (uses its ``client`` and ``_targets``)."""

    client: RemotingClient

    def broker_config(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, str]]:
        """Each master's config by broker name: every broker and store key, RocketMQ's
        names (mqadmin ``getBrokerConfig``); ``broker``: one, by name or address."""
        out = {}
        for name, addr in self._targets(broker, cluster):  # type: ignore[attr-defined]
            response = _invoke(self.client, name, addr, RequestCode.GET_BROKER_CONFIG)
            out[name] = parse_properties(bytes(response.body).decode())
        return out

    def update_broker_config(
        self, key: str, value: str, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, str | None]:
        """Set ``key`` to ``value`` on each master (mqadmin ``updateBrokerConfig -k -v``):
        a key the control plane reads acts at once, any other is written to the broker's
        config file for its next start; by broker name, the broker's remark saying which
        (None: it acted at once). Raises ``ResponseError`` naming the broker and the
        problem (an unknown or black-listed key, a bad value)."""
        body = f"{escape(key)}={escape(value)}\n".encode()
        return {
            name: _invoke(self.client, name, addr, RequestCode.UPDATE_BROKER_CONFIG, body).remark
            for name, addr in self._targets(broker, cluster)  # type: ignore[attr-defined]
        }


def _invoke(
    client: RemotingClient, name: str, addr: str, code: int, body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, body=body)
    try:
        return check_response(client.invoke(addr, request))
    except ResponseError as exc:
        raise ResponseError(exc.code, f"broker {name} ({addr}): {exc.remark}") from None
