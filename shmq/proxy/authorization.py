"""ACL for RocketMQ 5 clients: each RPC's ``authorization`` header and the resources it
touches, checked by the broker's one check (``shmq.broker.acl.validator``) against the same
``plain_acl.yml`` (RocketMQ 5.0 to 5.3.2's proxy with ACL 1.0).

The header is parsed as RocketMQ parses it: ``MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex>``, split once on the first space, then on
``,``, each item once on ``=``; the access key is the ``Credential`` value up to a ``/``;
the signature is the hex HMAC-SHA1 of the ``x-mq-date-time`` value (comparing its bytes is
RocketMQ's comparison of their Base64). Resources (groups as ``%RETRY%<group>``): a
consumer's Heartbeat SUB on its group; SendMessage PUB on its one topic; RecallMessage and
EndTransaction PUB; ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue,
QueryAssignment and ChangeInvisibleDuration SUB on the group and the topic; settings on the
Telemetry stream PUB on each published topic, or SUB on the group and each subscribed
topic; NotifyClientTermination SUB on the group; QueryRoute ANY on the topic.

Who the client is not established (no, unknown or badly signed credentials) answers the
RPC's status UNAUTHORIZED (40100, as RocketMQ 5's proxy answers its authentication
failures); an account lacking a permission ends the call with gRPC's PERMISSION_DENIED
(as RocketMQ 5's proxy ends it for an ACL 1.0 ``AclException``).
"""

from __future__ import annotations

import hmac
from typing import Any

from shmq.broker.acl.permission import ANY, PUB, SUB
from shmq.broker.acl.validator import AccessRequest, AclException, PlainAcl
from shmq.names import retry_topic
from shmq.proxy.context import RequestContext
from shmq.proxy.status import Code, ProxyError
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.remoting.security.signature import grpc_signature

CONSUMER_TYPES = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER)


class PermissionDenied(Exception):
    """The call ends with gRPC status PERMISSION_DENIED and ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def credentials(authorization: str) -> tuple[str | None, str | None]:
    """(access key, hex signature) of an ``authorization`` header ((None, None) when there
    is none); ``AclException`` when it is not RocketMQ's form."""
    if not authorization:
        return None, None
    _, sep, rest = authorization.partition(" ")
    if not sep:
        raise AclException("authentication header is incorrect", authentication=True)
    items: dict[str, str] = {}
    for item in rest.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AclException("authentication header is incorrect", authentication=True)
        items[key.strip()] = value.strip()
    access_key = items.get("Credential", "").split("/")[0]
    return access_key or None, items.get("Signature")


def _signed_by(date_time: str, given_hex: str | None):
    """Whether a secret key made ``given_hex`` over ``date_time`` (bad hex: none did)."""
    try:
        given = bytes.fromhex(given_hex or "")
    except ValueError:
        given = b""

    def check(secret: str) -> bool:
        return bool(given) and hmac.compare_digest(
            bytes.fromhex(grpc_signature(date_time, secret)), given
        )

    return check


def _group(resources: dict[str, int], group: pb.Resource, perm: int) -> None:
    _add(resources, retry_topic(group.name), perm)


def _add(resources: dict[str, int], name: str, perm: int) -> None:
    resources[name] = resources.get(name, 0) | perm


def grpc_resources(request: Any) -> dict[str, int]:
    """What ``request`` (an RPC's request, or a Telemetry stream's ``Settings``) needs."""
    needed: dict[str, int] = {}
    if isinstance(request, spb.QueryRouteRequest):
        _add(needed, request.topic.name, ANY)
    elif isinstance(request, spb.HeartbeatRequest | spb.NotifyClientTerminationRequest):
        consumer = not isinstance(request, spb.HeartbeatRequest) or (
            request.client_type in CONSUMER_TYPES
        )
        if consumer and request.HasField("group"):
            _group(needed, request.group, SUB)
    elif isinstance(request, spb.SendMessageRequest):
        if not request.messages:
            raise AclException("SendMessageRequest, messageCount is zero")
        topics = {m.topic.name for m in request.messages}
        if len(topics) > 1:
            raise AclException("SendMessageRequest, messages' topic is not consistent")
        _add(needed, topics.pop(), PUB)
    elif isinstance(request, spb.RecallMessageRequest | spb.EndTransactionRequest):
        _add(needed, request.topic.name, PUB)
    elif isinstance(request, spb.ReceiveMessageRequest):
        _group(needed, request.group, SUB)
        _add(needed, request.message_queue.topic.name, SUB)
    elif isinstance(
        request,
        spb.AckMessageRequest
        | spb.ChangeInvisibleDurationRequest
        | spb.ForwardMessageToDeadLetterQueueRequest
        | spb.QueryAssignmentRequest,
    ):
        _group(needed, request.group, SUB)
        _add(needed, request.topic.name, SUB)
    elif isinstance(request, pb.Settings):
        if request.HasField("publishing"):
            for topic in request.publishing.topics:
                _add(needed, topic.name, PUB)
        elif request.HasField("subscription"):
            _group(needed, request.subscription.group, SUB)
            for entry in request.subscription.subscriptions:
                _add(needed, entry.topic.name, SUB)
    return needed


class GrpcAcl:
    """``check`` runs before every RPC (and every Telemetry settings command)."""

    def __init__(self, acl: PlainAcl) -> None:
        self.acl = acl

    def check(self, ctx: RequestContext, request: Any) -> None:
        """Nothing when the client of ``ctx`` may send ``request``; ``ProxyError``
        (UNAUTHORIZED) or ``PermissionDenied`` otherwise."""
        try:
            access_key, given = credentials(ctx.authorization)
            if access_key is not None and not ctx.date_time:
                raise AclException("datetime is null.", authentication=True)
            self.acl.validate(AccessRequest(
                host=ctx.peer.rpartition(":")[0] or ctx.peer,
                access_key=access_key,
                signed_by=_signed_by(ctx.date_time, given),
                resources=grpc_resources(request),
            ))  # fmt: skip
        except AclException as exc:
            if exc.authentication:
                raise ProxyError(Code.UNAUTHORIZED, exc.message) from None
            raise PermissionDenied(exc.message) from None
