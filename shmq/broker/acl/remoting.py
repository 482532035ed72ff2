"""The control server's ACL hook: a remoting request as an ``AccessRequest`` (RocketMQ's
``PlainAccessResource.parse``: the resources each request code needs, the access key and
signature of its ext fields) checked by ``PlainAcl``; a refusal answers as RocketMQ 4.9's
broker answers an exception of its RPC hook, SYSTEM_ERROR with the exception's text.

Resources (groups as ``%RETRY%<group>``): a send needs PUB on its topic (SUB when the topic
is a retry topic); RECALL_MESSAGE PUB; CONSUMER_SEND_MSG_BACK SUB on the group; a pull SUB
on the topic and the group; QUERY_MESSAGE SUB on the topic; a heartbeat SUB on each
consumer's group and subscribed topics; UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP
SUB on the group; UPDATE_CONSUMER_OFFSET SUB on the group and the topic. Other codes need
a valid signature only (and admin codes an admin account).
"""

from __future__ import annotations

from collections.abc import Iterable

from shmq.broker.acl.permission import PUB, SUB
from shmq.broker.acl.validator import AccessRequest, AclException, PlainAcl
from shmq.errors import RemotingError, ResponseError
from shmq.names import RETRY_GROUP_TOPIC_PREFIX, retry_topic
from shmq.remoting.codes import RequestCode as C
from shmq.remoting.codes import ResponseCode
from shmq.remoting.protocol import RemotingCommand
from shmq.remoting.security import signature
from shmq.remoting.server import Connection

ACL_EXCEPTION = "org.apache.rocketmq.acl.common.AclException"

# code → (ext field, whether it names a group) for the codes that need SUB on what it names
_SUB_FIELDS: dict[int, tuple[tuple[str, bool], ...]] = {
    C.CONSUMER_SEND_MSG_BACK: (("group", True),),
    C.PULL_MESSAGE: (("topic", False), ("consumerGroup", True)),
    C.QUERY_MESSAGE: (("topic", False),),
    C.UNREGISTER_CLIENT: (("consumerGroup", True),),
    C.GET_CONSUMER_LIST_BY_GROUP: (("consumerGroup", True),),
    C.UPDATE_CONSUMER_OFFSET: (("consumerGroup", True), ("topic", False)),
}
_SEND_TOPIC_FIELD = {C.SEND_MESSAGE: "topic", C.SEND_MESSAGE_V2: "b", C.SEND_BATCH_MESSAGE: "b"}


def needed_resources(request: RemotingCommand) -> dict[str, int]:
    """What ``request`` needs; ``AclException`` when a HEART_BEAT body cannot be read
    (RocketMQ refuses what its parse cannot read). A field that is absent needs nothing:
    the processor refuses the request then."""
    fields = request.ext_fields
    code = request.code
    needed: dict[str, int] = {}
    if code in _SEND_TOPIC_FIELD:
        topic = fields.get(_SEND_TOPIC_FIELD[code])
        if topic is not None:
            needed[topic] = SUB if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else PUB
    elif code == C.RECALL_MESSAGE:
        _add(needed, fields.get("topic"), PUB)
    elif code == C.HEART_BEAT:
        for group, topics in _heartbeat_consumers(request):
            _add(needed, retry_topic(group), SUB)
            for topic in topics:
                _add(needed, topic, SUB)
    for name, group in _SUB_FIELDS.get(code, ()):
        value = fields.get(name)
        if value is not None:
            _add(needed, retry_topic(value) if group else value, SUB)
    return needed


def _add(needed: dict[str, int], resource: str | None, perm: int) -> None:
    if resource is not None:
        needed[resource] = needed.get(resource, 0) | perm


def _heartbeat_consumers(request: RemotingCommand) -> Iterable[tuple[str, list[str]]]:
    """Each consumer's group and subscribed topics of a HEART_BEAT's ``HeartbeatData``."""
    try:
        data = request.json_body() or {}
    except RemotingError as exc:
        raise AclException(str(exc)) from None
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    if not isinstance(consumers or [], list):
        raise AclException("HEART_BEAT: consumerDataSet is not a list")
    out = []
    for entry in consumers or []:
        subs = entry.get("subscriptionDataSet") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or not isinstance(subs or [], list):
            raise AclException("HEART_BEAT: a consumerDataSet entry is malformed")
        topics = [s.get("topic") if isinstance(s, dict) else None for s in subs or []]
        names = [entry.get("groupName"), *topics]
        if not all(isinstance(n, str) for n in names):
            raise AclException("HEART_BEAT: a group or topic name is not a string")
        out.append((entry["groupName"], topics))
    return out


class RemotingAcl:
    """``authorize`` is the control server's per-request hook (``RemotingServer.authorize``)."""

    def __init__(self, acl: PlainAcl) -> None:
        self.acl = acl

    def authorize(self, request: RemotingCommand, conn: Connection) -> None:
        """Nothing when ``request`` from ``conn`` may reach its processor; ``ResponseError``
        (SYSTEM_ERROR, RocketMQ's AclException text) otherwise."""
        fields = request.ext_fields
        try:
            self.acl.validate(AccessRequest(
                host=conn.peer.rpartition(":")[0] or conn.peer,
                access_key=fields.get(signature.ACCESS_KEY),
                signed_by=lambda secret: signature.verify(fields, request.body, secret),
                resources=needed_resources(request),
                code=request.code,
            ))  # fmt: skip
        except AclException as exc:
            raise ResponseError(
                ResponseCode.SYSTEM_ERROR, f"{ACL_EXCEPTION}: {exc.message}"
            ) from None
