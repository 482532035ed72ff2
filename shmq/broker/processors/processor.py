"""What every request processor is (RocketMQ's ``NettyRequestProcessor``): the request codes
it answers, a handler for each, and the broker context it answers from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from shmq.broker.context import BrokerContext
from shmq.remoting.server import RemotingServer


class Processor:
    """A processor over the broker context; ``CODES`` maps each request code it answers to
    the name of its handler method, ``(request, connection) -> response``."""

    CODES: ClassVar[Mapping[int, str]] = {}

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def register(self, server: RemotingServer) -> None:
        """Give ``server`` this processor's handlers."""
        for code, handler in self.CODES.items():
            server.register(code, getattr(self, handler))
