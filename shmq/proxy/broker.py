"""The proxy's way to the broker: remoting requests to its control server (RocketMQ's
CLUSTER-mode ``MQClientAPIExt``), over a few multiplexed connections, and the broker's
topic and group configs, cached for a moment as RocketMQ's proxy caches its metadata.

The connections are ``DuplexChannel``s: the broker may speak first on them. It does on the
``control`` one, where the proxy's heartbeats register its clients (``registration``), so
the broker's transaction check-backs (``CHECK_TRANSACTION_STATE``) arrive there and go to
``on_check``. Long polls (POP) get
connections of their own, so a held POP never queues a send or an ack behind it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from shmq.errors import RemotingError, RemotingTimeoutError
from shmq.proxy.status import Code, ProxyError, remoting_code
from shmq.remoting.duplex import DuplexChannel
from shmq.remoting.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

CONFIG_TTL_S = 3.0  # how long a topic's or group's config is taken as current
POP_CHANNELS = 4


class BrokerClient:
    """Remoting requests to the broker at ``address`` as client ``client_id`` (over TLS when
    ``tls`` is given)."""

    def __init__(
        self,
        address: str,
        client_id: str,
        on_check: Callable[[RemotingCommand], None],
        timeout_s: float,
        tls: TlsOptions | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        """``credentials``: with the broker's ACL on, what every request is signed with."""
        self.address = address
        self.client_id = client_id
        self.on_check = on_check
        self.timeout_s = timeout_s
        self.control = DuplexChannel(address, self._on_request, default_timeout=timeout_s,
                                     tls=tls, credentials=credentials)  # fmt: skip
        self.data = DuplexChannel(address, self._on_request, default_timeout=timeout_s,
                                  tls=tls, credentials=credentials)  # fmt: skip
        self._pops = [DuplexChannel(address, self._on_request, tls=tls, credentials=credentials)
                      for _ in range(POP_CHANNELS)]  # fmt: skip
        self._next_pop = itertools.cycle(self._pops)
        self._cache: dict[tuple[int, str], tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        for channel in (self.control, self.data, *self._pops):
            channel.close()

    def _on_request(self, request: RemotingCommand) -> RemotingCommand | None:
        """A request of the broker's (on a connection's reader thread)."""
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.on_check(request)
        return None  # oneway ones need no answer; others: REQUEST_CODE_NOT_SUPPORTED

    # -- requests ---------------------------------------------------------------------------

    def invoke(
        self,
        code: int,
        fields: dict[str, Any],
        body: bytes = b"",
        timeout_s: float | None = None,
        channel: DuplexChannel | None = None,
    ) -> RemotingCommand:
        """Send a request and return its response (any code); a lost or silent broker is
        ``ProxyError`` (PROXY_TIMEOUT, or INTERNAL_SERVER_ERROR), as RocketMQ's proxy
        answers its remoting exceptions."""
        channel = channel or self.data
        request = RemotingCommand.request(code, fields, body)
        try:
            return channel.invoke(request, self.timeout_s if timeout_s is None else timeout_s)
        except RemotingTimeoutError as exc:
            raise ProxyError(Code.PROXY_TIMEOUT, str(exc)) from None
        except RemotingError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None

    def call(self, code: int, fields: dict[str, Any], body: bytes = b"") -> RemotingCommand:
        """``invoke`` that requires SUCCESS (else ``ProxyError`` with the mapped code)."""
        return checked(self.invoke(code, fields, body))

    def invoke_pop(self, code: int, fields: dict[str, Any], timeout_s: float) -> RemotingCommand:
        """A long poll, on a POP connection (in turn)."""
        return self.invoke(code, fields, timeout_s=timeout_s, channel=next(self._next_pop))

    def send_oneway(self, code: int, fields: dict[str, Any]) -> None:
        """A oneway request on the control connection (END_TRANSACTION, as the proxy's)."""
        try:
            self.control.send_soon(RemotingCommand.request(code, fields))
        except RemotingError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None

    def heartbeat(
        self,
        client_id: str,
        producer_groups: list[str],
        consumer: dict[str, Any] | None = None,
        language: str = "",
    ) -> None:
        """A HEART_BEAT on the control connection as client ``client_id`` (the proxy's own,
        or a gRPC client's, ``language`` its): producer of ``producer_groups`` (the broker
        then checks their half messages back through this connection), member of the
        group of ``consumer`` (a ``ConsumerData``). A language that is no remoting
        ``LanguageCode`` (the gRPC header is the client's to fill) leaves the proxy's."""
        body = {"clientID": client_id,
                "producerDataSet": [{"groupName": g} for g in producer_groups],
                "consumerDataSet": [consumer] if consumer is not None else []}  # fmt: skip
        request = RemotingCommand.request(
            RequestCode.HEART_BEAT, {}, RemotingCommand.body_json(body)
        )
        if language in LanguageCode.__members__:
            request.language = language
        try:
            checked(self.control.invoke(request, self.timeout_s))
        except RemotingError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None

    # -- metadata ---------------------------------------------------------------------------

    def topic_config(self, topic: str) -> dict[str, Any]:
        """The broker's config of ``topic`` (GET_TOPIC_CONFIG); TOPIC_NOT_FOUND if none."""
        config = self._cached(RequestCode.GET_TOPIC_CONFIG, topic, {"topic": topic})
        if config is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} not exist")
        return config

    def group_config(self, group: str) -> dict[str, Any] | None:
        """The broker's config of ``group`` (GET_SUBSCRIPTIONGROUP_CONFIG), None if none."""
        return self._cached(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, group, {"group": group})

    def _cached(self, code: int, name: str, fields: dict[str, str]) -> dict[str, Any] | None:
        key = (code, name)
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < CONFIG_TTL_S:
            return hit[1]
        response = self.invoke(code, fields)
        if response.code in (
            ResponseCode.TOPIC_NOT_EXIST,
            ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        ):
            value = None
        else:
            value = checked(response).json_body()
            if not isinstance(value, dict):
                raise ProxyError(
                    Code.INTERNAL_SERVER_ERROR, f"the broker's {name} config is not an object"
                )
        with self._lock:
            if len(self._cache) > 4096:  # names come from clients: forget the old ones
                self._cache = {k: v for k, v in self._cache.items() if now - v[0] < CONFIG_TTL_S}
            self._cache[key] = (now, value)
        return value


def checked(response: RemotingCommand) -> RemotingCommand:
    """``response`` if SUCCESS, else ``ProxyError`` with RocketMQ's mapping of its code."""
    if response.code != ResponseCode.SUCCESS:
        raise ProxyError(remoting_code(response.code), response.remark or f"code {response.code}")
    return response
