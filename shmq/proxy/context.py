"""What every RPC's gRPC metadata says about its client (RocketMQ's ``ProxyContext`` from
``GrpcConstants`` headers): its id, which every RPC requires, language and version, and
the peer's address, and its ACL credentials (``authorization``, signed over
``x-mq-date-time``: ``shmq.proxy.authorization``)."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from shmq.proxy.status import Code, ProxyError

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION = "5.0.3"


@dataclass(frozen=True)
class RequestContext:
    client_id: str
    language: str
    client_version: str
    peer: str  # host:port
    authorization: str = ""
    date_time: str = ""

    @classmethod
    def of(cls, context: grpc.aio.ServicerContext) -> RequestContext:
        """The call's context; ``ProxyError(CLIENT_ID_REQUIRED)`` without a client id."""
        headers = {}
        for key, value in context.invocation_metadata() or ():
            if isinstance(value, str):
                headers.setdefault(key, value)
        client_id = headers.get(CLIENT_ID, "")
        if not client_id.strip():
            raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
        return cls(client_id, headers.get(LANGUAGE, ""), headers.get(CLIENT_VERSION, ""),
                   peer_address(context.peer() or ""), headers.get(AUTHORIZATION, ""),
                   headers.get(DATE_TIME, ""))  # fmt: skip

    def polling_time_code(self) -> int:
        """The code for too little time left to long-poll: clients before 5.0.3 know only
        BAD_REQUEST."""
        old = (
            not self.client_version
            or self.client_version < ILLEGAL_POLLING_TIME_INTRODUCED_CLIENT_VERSION
        )
        return Code.BAD_REQUEST if old else Code.ILLEGAL_POLLING_TIME


def peer_address(peer: str) -> str:
    """gRPC's ``ipv4:127.0.0.1:5555`` / ``ipv6:[::1]:5555`` as ``host:port``."""
    kind, _, address = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        return address.replace("[", "").replace("]", "") if kind == "ipv6" else address
    return peer
