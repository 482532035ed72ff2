"""ACL 1.0 without a broker: the signature against the reference's worked examples,
``plain_acl.yml`` parsing, address patterns, the resources of each request, the check's
order and messages, the gRPC authorization header; and hypothesis fuzz of the parser, the
patterns and the check (a refusal, never a crash)."""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shmq.broker.acl.address import AclConfigError, parse_pattern
from shmq.broker.acl.permission import ANY, DENY, PUB, SUB, check_perm, parse_perm
from shmq.broker.acl.plain_config import parse_acl_config
from shmq.broker.acl.plain_file import PlainAclFile
from shmq.broker.acl.remoting import RemotingAcl, needed_resources
from shmq.broker.acl.validator import AclException, PlainAcl
from shmq.errors import ResponseError
from shmq.proxy.authorization import GrpcAcl, PermissionDenied, credentials, grpc_resources
from shmq.proxy.context import RequestContext
from shmq.proxy.status import Code, ProxyError
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.remoting.protocol import RemotingCommand, RequestCode
from shmq.remoting.security import signature

EXAMPLE = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


class Conn:
    def __init__(self, peer: str) -> None:
        self.peer = peer


def acl_of(tmp_path, text: str = EXAMPLE) -> PlainAcl:
    path = tmp_path / "plain_acl.yml"
    path.write_text(text)
    return PlainAcl(PlainAclFile(str(path)))


def signed(code: int, fields: dict[str, str], body: bytes = b"", *, ak: str = "RocketMQ",
           secret: str = "12345678") -> RemotingCommand:  # fmt: skip
    request = RemotingCommand.request(code, {**fields, "AccessKey": ak}, body)
    request.ext_fields["Signature"] = signature.sign(request.ext_fields, body, secret)
    return request


def refusal(acl: PlainAcl, request: RemotingCommand, peer: str = "127.0.0.1:5000") -> str | None:
    try:
        RemotingAcl(acl).authorize(request, Conn(peer))
    except ResponseError as exc:
        assert exc.code == 1  # SYSTEM_ERROR, as RocketMQ 4.9's broker answers its RPC hook
        prefix = "org.apache.rocketmq.acl.common.AclException: "
        assert exc.remark.startswith(prefix)
        return exc.remark[len(prefix) :]
    return None


# -- the signature: the reference's worked examples ------------------------------------------


def test_remoting_signature_matches_the_worked_example():
    fields = {"AccessKey": "RocketMQ", "commitOffset": "100", "consumerGroup": "GID_A",
              "queueId": "0", "topic": "TopicA"}  # fmt: skip
    assert signature.signed_content(fields, None) == b"RocketMQ100GID_A0TopicA"
    assert signature.sign(fields, None, "12345678") == "JqTWp2Zt+6Ttay4zloc2OX0alG4="
    assert signature.verify({**fields, "Signature": "JqTWp2Zt+6Ttay4zloc2OX0alG4="}, b"",
                            "12345678")  # fmt: skip
    assert not signature.verify({**fields, "Signature": "JqTWp2Zt+6Ttay4zloc2OX0alG4="}, b"",
                                "12345679")  # fmt: skip


def test_grpc_signature_matches_the_worked_example():
    hex_sig = signature.grpc_signature("20240102T030405Z", "12345678")
    assert hex_sig == "0183EC6E9BF0753CA4402ACB305F8E39D222458F"
    assert base64.b64encode(bytes.fromhex(hex_sig)).decode() == "AYPsbpvwdTykQCrLMF+OOdIiRY8="
    header = ("MQv2-HMAC-SHA1 Credential=RocketMQ, SignedHeaders=x-mq-date-time, "
              f"Signature={hex_sig}")  # fmt: skip
    assert credentials(header) == ("RocketMQ", hex_sig)


# -- plain_acl.yml -----------------------------------------------------------------------------


def test_the_example_file_parses_with_every_key():
    config = parse_acl_config(EXAMPLE + "dataVersion:\n  - counter: 3\n    timestamp: 17\n")
    assert config.global_white_addresses == ("10.10.103.*", "192.168.0.*")
    rocketmq = config.accounts["RocketMQ"]
    assert rocketmq.secret_key == "12345678" and not rocketmq.admin  # a YAML number, as text
    assert rocketmq.topic_perm("topicB") == PUB | SUB and rocketmq.group_perm("groupA") == DENY
    assert rocketmq.default_perm(group=False) == DENY and rocketmq.default_perm(group=True) == SUB
    assert config.accounts["rocketmq2"].admin
    assert config.data_version.counter == 3 and config.data_version.timestamp == 17
    assert "12345678" not in repr(config)
    assert parse_acl_config(config.to_yaml()) == config


@pytest.mark.parametrize("text, why", [
    ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "cannot be less than 6"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 123456\n", "secretKey of accessKey"),
    ("accounts:\n  - accessKey: RocketMQ\n", "can't be null"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [a]\n",
     "Parse resource permission error"),
    ("accounts:\n  - {accessKey: RocketMQ, secretKey: 12345678}\n"
     "  - {accessKey: RocketMQ, secretKey: 87654321}\n", "repeated"),
    ("globalWhiteRemoteAddresses: [10.10.*.5]\n", "RangeRemoteAddressStrategy"),
    ("accounts: [1, 2\n", "not YAML"),
    ("- a\n- b\n", "not a mapping"),
    ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: maybe\n", "admin"),
])  # fmt: skip
def test_a_bad_file_is_refused_naming_why_without_the_secret(text, why):
    with pytest.raises(AclConfigError, match=why) as err:
        parse_acl_config(text)
    assert "123456" not in str(err.value) and "87654321" not in str(err.value)


def test_permission_words_and_check():
    assert [parse_perm(w) for w in ("DENY", "PUB", "SUB", "PUB|SUB", " SUB|PUB ", "pub", None)] \
        == [DENY, PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY]  # fmt: skip
    assert check_perm(PUB, PUB | SUB) and not check_perm(SUB, PUB)
    assert check_perm(ANY, SUB) and not check_perm(ANY, DENY | PUB) and not check_perm(PUB, DENY)


@pytest.mark.parametrize("pattern, yes, no", [
    ("", [], ["127.0.0.1"]),
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["1.2.3.4"], []),
    ("192.168.0.{1,2}", ["192.168.0.1", "192.168.0.2"], ["192.168.0.3"]),
    ("127.0.0.1,10.0.0.2", ["127.0.0.1", "10.0.0.2"], ["10.0.0.3"]),
    ("192.168.0.*", ["192.168.0.0", "192.168.0.255"], ["192.168.1.1"]),
    ("10.10.1-5.*", ["10.10.1.9", "10.10.5.0"], ["10.10.6.1", "10.11.3.3"]),
    ("10.*.*.*", ["10.200.1.1"], ["11.0.0.1"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("1:2:3:*", ["1:2:3:4::9", "0001:0002:0003:ffff::"], ["1:2:4::"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
    ("1::{a,b}", ["1::a", "1:0:0:0:0:0:0:b"], ["1::c"]),
])  # fmt: skip
def test_address_patterns(pattern, yes, no):
    p = parse_pattern(pattern)
    assert all(p.matches(a) for a in yes) and not any(p.matches(a) for a in no)


@pytest.mark.parametrize("pattern", ["10.10.*.5", "*.1.1.1", "10.5-1.*.*", "10.1.300-400.*",
                                     "1.2.{3,4}", "a.b.c.{d}", "1,x", "10.10.*"])  # fmt: skip
def test_bad_address_patterns_are_refused(pattern):
    with pytest.raises(AclConfigError):
        parse_pattern(pattern)


# -- resources and the check -------------------------------------------------------------------


def test_resources_of_each_request_code():
    def needed(code, fields, body=b""):
        return needed_resources(RemotingCommand.request(code, fields, body))

    assert needed(RequestCode.SEND_MESSAGE, {"topic": "T"}) == {"T": PUB}
    assert needed(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G"}) == {"%RETRY%G": SUB}
    assert needed(RequestCode.SEND_BATCH_MESSAGE, {"b": "T"}) == {"T": PUB}
    assert needed(RequestCode.RECALL_MESSAGE, {"topic": "T"}) == {"T": PUB}
    assert needed(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}) == {"%RETRY%G": SUB}
    assert needed(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}) \
        == {"T": SUB, "%RETRY%G": SUB}  # fmt: skip
    assert needed(RequestCode.QUERY_MESSAGE, {"topic": "T"}) == {"T": SUB}
    assert needed(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}) == {"%RETRY%G": SUB}
    assert needed(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}) \
        == {"%RETRY%G": SUB}  # fmt: skip
    assert needed(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "G", "topic": "T"}) \
        == {"%RETRY%G": SUB, "T": SUB}  # fmt: skip
    heartbeat = {
        "clientID": "c",
        "consumerDataSet": [
            {"groupName": "G", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "%RETRY%G"}]}
        ],
        "producerDataSet": [{"groupName": "P"}],
    }
    assert needed(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode()) \
        == {"%RETRY%G": SUB, "T1": SUB}  # fmt: skip
    assert needed(RequestCode.GET_MAX_OFFSET, {"topic": "T"}) == {}
    with pytest.raises(AclException):
        needed(RequestCode.HEART_BEAT, {}, b"{not json")


def test_the_check_in_rocketmq_order_with_its_messages(tmp_path):
    acl = acl_of(tmp_path)
    send = {"topic": "topicB"}
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, send)) is None
    unsigned = RemotingCommand.request(RequestCode.SEND_MESSAGE, send)
    assert refusal(acl, unsigned) == "No accessKey is configured"
    assert refusal(acl, unsigned, "192.168.0.7:1") is None  # global white address
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, send, ak="Nobody12")) \
        == "No acl config for Nobody12"  # fmt: skip
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, send, secret="wrong-secret")) \
        == "Check signature failed for accessKey=RocketMQ"  # fmt: skip
    tampered = signed(RequestCode.SEND_MESSAGE, send)
    tampered.ext_fields["topic"] = "topicC"
    assert refusal(acl, tampered) == "Check signature failed for accessKey=RocketMQ"
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, {"topic": "topicA"})) \
        == "No permission for topic:topicA"  # fmt: skip
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, {"topic": "Other"})) \
        == "No default permission for topic:Other"  # fmt: skip
    assert refusal(acl, signed(RequestCode.SEND_MESSAGE, {"topic": "RMQ_SYS_TRACE_TOPIC"})) is None
    pull = {"topic": "topicC", "consumerGroup": "groupA"}
    assert refusal(acl, signed(RequestCode.PULL_MESSAGE, pull)) == "No permission for group:groupA"
    pull["consumerGroup"] = "groupX"  # the default group perm is SUB
    assert refusal(acl, signed(RequestCode.PULL_MESSAGE, pull)) is None
    create = {"topic": "New"}
    assert refusal(acl, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create)) \
        == "Need admin permission for request code=17, but accessKey=RocketMQ is not"  # fmt: skip
    admin = signed(RequestCode.UPDATE_AND_CREATE_TOPIC, create, ak="rocketmq2")
    assert refusal(acl, admin) is None
    # the account's white address skips the signature and the permissions
    assert refusal(acl, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                {**create, "AccessKey": "rocketmq2"}),
                   "192.168.1.20:9") is None  # fmt: skip


# -- gRPC --------------------------------------------------------------------------------------


def grpc_ctx(
    ak: str | None = "RocketMQ",
    secret: str = "12345678",
    date_time: str = "20240102T030405Z",
    peer: str = "127.0.0.1:1",
) -> RequestContext:
    header = ""
    if ak is not None:
        sig = signature.grpc_signature(date_time, secret).lower()  # Python clients: lower case
        header = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return RequestContext("c", "PYTHON", "5.0.7", peer, header, date_time)


def test_grpc_check(tmp_path):
    acl = GrpcAcl(acl_of(tmp_path))
    route = spb.QueryRouteRequest(topic=pb.Resource(name="topicC"))
    acl.check(grpc_ctx(), route)  # ANY: SUB is enough
    send = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="topicB"))])
    acl.check(grpc_ctx(), send)
    for ctx, message in [(grpc_ctx(None), "No accessKey is configured"),
                         (grpc_ctx(secret="wrong-secret"), "Check signature failed"),
                         (grpc_ctx(date_time=""), "datetime is null."),
                         (grpc_ctx("Nobody12"), "No acl config for Nobody12")]:  # fmt: skip
        with pytest.raises(ProxyError) as err:
            acl.check(ctx, send)
        assert err.value.code == Code.UNAUTHORIZED and message in err.value.message
    denied = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="topicC"))])
    with pytest.raises(PermissionDenied, match="No permission for topic:topicC"):
        acl.check(grpc_ctx(), denied)
    queue = pb.MessageQueue(topic=pb.Resource(name="topicC"))
    receive = spb.ReceiveMessageRequest(group=pb.Resource(name="groupA"), message_queue=queue)
    with pytest.raises(PermissionDenied, match="group:groupA"):
        acl.check(grpc_ctx(), receive)
    acl.check(grpc_ctx(None, peer="10.10.103.4:5"), denied)  # global white address


def test_grpc_resources():
    sub = pb.Settings(
        subscription=pb.Subscription(
            group=pb.Resource(name="G"),
            subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="T"))],
        )
    )
    assert grpc_resources(sub) == {"%RETRY%G": SUB, "T": SUB}
    pub = pb.Settings(publishing=pb.Publishing(topics=[pb.Resource(name="A"),
                                                       pb.Resource(name="B")]))  # fmt: skip
    assert grpc_resources(pub) == {"A": PUB, "B": PUB}
    heartbeat = spb.HeartbeatRequest(group=pb.Resource(name="G"), client_type=pb.PRODUCER)
    assert grpc_resources(heartbeat) == {}
    heartbeat.client_type = pb.SIMPLE_CONSUMER
    assert grpc_resources(heartbeat) == {"%RETRY%G": SUB}
    mixed = spb.SendMessageRequest(messages=[pb.Message(topic=pb.Resource(name="A")),
                                             pb.Message(topic=pb.Resource(name="B"))])  # fmt: skip
    with pytest.raises(AclException, match="not consistent"):
        grpc_resources(mixed)


# -- fuzz: a refusal, never a crash ------------------------------------------------------------

text = st.text(st.characters(codec="utf-8"), max_size=40)
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), text,
                    st.just("x" * 100_000), st.just(10**400))  # fmt: skip
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(text, inner, max_size=4), max_leaves=12)  # fmt: skip
keys = st.sampled_from(["accounts", "globalWhiteRemoteAddresses", "dataVersion", "accessKey",
                        "secretKey", "admin", "topicPerms", "groupPerms", "whiteRemoteAddress",
                        "defaultTopicPerm", "defaultGroupPerm", "counter"])  # fmt: skip
documents = st.recursive(values, lambda inner: st.dictionaries(keys, inner, max_size=5)
                         | st.lists(inner, max_size=3), max_leaves=20)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(text, documents.map(json.dumps), st.binary(max_size=200).map(
    lambda b: b.decode("utf-8", "replace"))))  # fmt: skip
def test_fuzz_the_file_parser(source):
    try:
        config = parse_acl_config(source)
    except AclConfigError:
        return
    assert parse_acl_config(config.to_yaml()) == config


patterns = st.one_of(text, st.lists(st.sampled_from(["1", "255", "*", "1-5", "{1,2}", "a", ":",
                                                     ".", ",", "-", "300", "ffff", "{"]),
                                    max_size=10).map("".join))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(patterns, st.one_of(text, st.ip_addresses().map(str)))
def test_fuzz_address_patterns(pattern, address):
    try:
        compiled = parse_pattern(pattern)
    except AclConfigError:
        return
    assert compiled.matches(address) in (True, False)


@settings(max_examples=300, deadline=None)
@given(code=st.sampled_from([*RequestCode]), fields=st.dictionaries(
    st.sampled_from(["AccessKey", "Signature", "topic", "b", "group", "consumerGroup", "x"]),
    st.one_of(text, st.just("RocketMQ"), st.just("rocketmq2"), st.just("=" * 5000))),
    body=st.one_of(st.binary(max_size=64), documents.map(lambda d: json.dumps(d).encode())),
    peer=st.one_of(text, st.just("127.0.0.1:1"), st.just("192.168.1.9:2")))  # fmt: skip
def test_fuzz_the_remoting_check(tmp_path_factory, code, fields, body, peer):
    acl = _fuzz_acl(tmp_path_factory)
    request = RemotingCommand.request(code, fields, body)
    try:
        RemotingAcl(acl).authorize(request, Conn(peer))
    except ResponseError as exc:
        assert exc.code == 1


@settings(max_examples=300, deadline=None)
@given(header=st.one_of(text, st.builds(
    "MQv2-HMAC-SHA1 Credential={}, SignedHeaders=x-mq-date-time, Signature={}".format,
    st.sampled_from(["RocketMQ", "", "a/b/c", "rocketmq2/x"]),
    st.one_of(text, st.just("zz"), st.just("0" * 40), st.just("A" * 100_001))),
), date_time=text, peer=text)  # fmt: skip
def test_fuzz_the_grpc_check(tmp_path_factory, header, date_time, peer):
    acl = GrpcAcl(_fuzz_acl(tmp_path_factory))
    ctx = RequestContext("c", "PYTHON", "5.0.7", peer, header, date_time)
    try:
        acl.check(ctx, spb.QueryRouteRequest(topic=pb.Resource(name="topicB")))
    except ProxyError as exc:
        assert exc.code == Code.UNAUTHORIZED
    except PermissionDenied:
        pass


_FUZZ_ACL: list[PlainAcl] = []


def _fuzz_acl(tmp_path_factory) -> PlainAcl:
    if not _FUZZ_ACL:
        path = os.path.join(str(tmp_path_factory.mktemp("acl")), "plain_acl.yml")
        with open(path, "w") as f:
            f.write(EXAMPLE)
        _FUZZ_ACL.append(PlainAcl(PlainAclFile(path)))
    return _FUZZ_ACL[0]
