"""shmq: Apache RocketMQ's design as a multiprocess shared-memory message broker for one host.

The public API is what this module exports; everything else is internal. Names are loaded
on first use, so ``import shmq`` stays cheap (the CLI and tools import it).

Example::

    import shmq

    with shmq.Producer("Orders-P", "127.0.0.1:9876") as producer:
        producer.send(shmq.Message("Orders", b"order 42 paid", tags="Paid"))

    def on_message(msgs, ctx):
        for msg in msgs:
            print(msg.queue_offset, msg.body)
        return shmq.ConsumeResult.CONSUME_SUCCESS

    consumer = shmq.PushConsumer("Orders-C", "127.0.0.1:9876", listener=on_message)
    consumer.subscribe("Orders", "Paid")
    consumer.start()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Producer": "shmq.client.producer.producer",
    "TransactionProducer": "shmq.client.transaction.producer",
    "PushConsumer": "shmq.client.consumer.push",
    "PullConsumer": "shmq.client.consumer.lite_pull",
    "SimpleConsumer": "shmq.client.consumer.pop.simple",
    "PopBatch": "shmq.client.consumer.pop.batch",
    "Admin": "shmq.client.admin.admin",
    "EmbeddedBroker": "shmq.embedded",
    "Credentials": "shmq.remoting.security.credentials",
    "TlsOptions": "shmq.remoting.security.tls",
    "Message": "shmq.message",
    "MessageExt": "shmq.message",
    "MessageBatch": "shmq.message",
    "MessageQueue": "shmq.client.types",
    "MessageSelector": "shmq.client.selector",
    "SendResult": "shmq.client.types",
    "SendStatus": "shmq.client.types",
    "BulkSendResult": "shmq.client.types",
    "MessageModel": "shmq.client.types",
    "ConsumeFromWhere": "shmq.client.types",
    "ConsumeResult": "shmq.client.types",
    "ConsumeContext": "shmq.client.types",
    "ConsumeOrderlyStatus": "shmq.client.types",
    "ConsumeOrderlyContext": "shmq.client.types",
    "LocalTransactionState": "shmq.client.transaction.types",
    "TransactionListener": "shmq.client.transaction.types",
    "TransactionSendResult": "shmq.client.transaction.types",
    "allocation_strategy": "shmq.client.consumer.allocate",
    "AllocateMessageQueueStrategy": "shmq.client.consumer.allocate",
    "ShmqError": "shmq.errors",
    "ConfigError": "shmq.errors",
    "ClientError": "shmq.errors",
    "SendError": "shmq.errors",
    "SendTimeoutError": "shmq.errors",
    "RequestTimeoutError": "shmq.errors",
    "create_reply_message": "shmq.client.producer.request_reply",
    "NoRouteError": "shmq.errors",
    "InvalidMessageError": "shmq.errors",
    "MessageTooLargeError": "shmq.errors",
    "RemotingError": "shmq.errors",
    "ResponseError": "shmq.errors",
}

__all__ = [  # the names of _EXPORTS, spelled out for linters and type checkers
    "Admin",
    "AllocateMessageQueueStrategy",
    "BulkSendResult",
    "ClientError",
    "ConfigError",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "ConsumeResult",
    "Credentials",
    "EmbeddedBroker",
    "InvalidMessageError",
    "LocalTransactionState",
    "Message",
    "MessageBatch",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "MessageTooLargeError",
    "NoRouteError",
    "PopBatch",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "RemotingError",
    "RequestTimeoutError",
    "ResponseError",
    "SendError",
    "SendResult",
    "SendStatus",
    "SendTimeoutError",
    "ShmqError",
    "SimpleConsumer",
    "TlsOptions",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "allocation_strategy",
    "create_reply_message",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'shmq' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from shmq.client.admin.admin import Admin
    from shmq.client.consumer.allocate import AllocateMessageQueueStrategy, allocation_strategy
    from shmq.client.consumer.lite_pull import PullConsumer
    from shmq.client.consumer.pop.batch import PopBatch
    from shmq.client.consumer.pop.simple import SimpleConsumer
    from shmq.client.consumer.push import PushConsumer
    from shmq.client.producer.producer import Producer
    from shmq.client.producer.request_reply import create_reply_message
    from shmq.client.selector import MessageSelector
    from shmq.client.transaction.producer import TransactionProducer
    from shmq.client.transaction.types import (
        LocalTransactionState,
        TransactionListener,
        TransactionSendResult,
    )
    from shmq.client.types import (
        BulkSendResult,
        ConsumeContext,
        ConsumeFromWhere,
        ConsumeOrderlyContext,
        ConsumeOrderlyStatus,
        ConsumeResult,
        MessageModel,
        MessageQueue,
        SendResult,
        SendStatus,
    )
    from shmq.errors import (
        ClientError,
        ConfigError,
        InvalidMessageError,
        MessageTooLargeError,
        NoRouteError,
        RemotingError,
        RequestTimeoutError,
        ResponseError,
        SendError,
        SendTimeoutError,
        ShmqError,
    )
    from shmq.message import Message, MessageBatch, MessageExt
    from shmq.remoting.security.credentials import Credentials
    from shmq.remoting.security.tls import TlsOptions
