"""ACL 1.0 on a running broker (``aclEnable=true``, ``aclFile``): refused requests answer as
RocketMQ 4.9's broker (SYSTEM_ERROR, the AclException text) and change nothing; an edit of
plain_acl.yml acts without a restart; the ACL admin codes and ``shmq admin`` commands (the
gRPC side: ``tests/proxy/test_acl_grpc.py``)."""

from __future__ import annotations

import os
import stat
import time

import pytest
from click.testing import CliRunner
from waiting import wait_for

from e2e_helpers import embedded
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode, ResponseCode
from shmq.remoting.security import signature
from shmq_cli.main import cli

ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Allowed=PUB, Denied=DENY]
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
"""
PREFIX = "org.apache.rocketmq.acl.common.AclException: "
NOT_ADMIN = "Need admin permission for request code={}, but accessKey=producer1 is not"


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl")
    (root / "plain_acl.yml").write_text(ACL)
    conf = {"acl_enable": True, "acl_file": str(root / "plain_acl.yml")}
    with embedded(str(root / "store"), **conf) as broker:
        yield broker


def call(mq, code: int, fields: dict, body: bytes = b"", *, ak: str | None = "operator1",
         secret: str = "operator-secret") -> RemotingCommand:  # fmt: skip
    request = RemotingCommand.request(code, fields, body)
    if ak is not None:
        request.ext_fields["AccessKey"] = ak
        request.ext_fields["Signature"] = signature.sign(request.ext_fields, body, secret)
    with RemotingClient() as client:
        return client.invoke(mq.broker_address, request)


def send(mq, topic: str, **who) -> RemotingCommand:
    born = str(int(time.time() * 1000))
    fields = {"a": "pg", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": born,
              "h": "0", "i": "", "j": "0", "k": "false"}  # fmt: skip
    return call(mq, RequestCode.SEND_MESSAGE_V2, fields, b"body", **who)


def create_topic(mq, topic: str) -> None:
    """As the admin account (``EmbeddedBroker.create_topic`` signs nothing)."""
    fields = {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    resp = call(mq, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    assert resp.code == ResponseCode.SUCCESS, resp


def max_offset(mq, topic: str) -> int:
    resp = call(mq, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
    return int(resp.ext_fields.get("offset", 0)) if resp.code == ResponseCode.SUCCESS else 0


def refused(resp: RemotingCommand, message: str) -> None:
    assert resp.code == ResponseCode.SYSTEM_ERROR, resp
    assert resp.remark == PREFIX + message


def test_refused_requests_change_nothing(mq):
    for topic in ("Allowed", "Denied", "Created"):
        create_topic(mq, topic)
    refused(send(mq, "Allowed", ak=None), "No accessKey is configured")
    refused(send(mq, "Allowed", ak="producer1", secret="wrong-secret"),
            "Check signature failed for accessKey=producer1")  # fmt: skip
    refused(send(mq, "Allowed", ak="stranger1"), "No acl config for stranger1")
    refused(send(mq, "Denied", ak="producer1", secret="producer-secret"),
            "No permission for topic:Denied")  # fmt: skip
    refused(send(mq, "Other", ak="producer1", secret="producer-secret"),
            "No default permission for topic:Other")  # fmt: skip
    assert max_offset(mq, "Allowed") == 0 and max_offset(mq, "Denied") == 0
    create = {"topic": "Sneaky", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    refused(call(mq, RequestCode.UPDATE_AND_CREATE_TOPIC, create, ak="producer1",
                 secret="producer-secret"),
            NOT_ADMIN.format(17))  # fmt: skip
    topics = call(mq, RequestCode.GET_ALL_TOPIC_CONFIG, {}).json_body()["topicConfigTable"]
    assert "Sneaky" not in topics
    ok = send(mq, "Allowed", ak="producer1", secret="producer-secret")
    assert ok.code == ResponseCode.SUCCESS, ok
    wait_for(lambda: max_offset(mq, "Allowed") == 1, what="the allowed send stored")


def test_an_edited_file_acts_without_a_restart(mq, tmp_path):
    path = mq.broker.config.acl_file
    create_topic(mq, "Later")
    refused(send(mq, "Later", ak="producer1", secret="producer-secret"),
            "No default permission for topic:Later")  # fmt: skip
    with open(path) as f:
        before = f.read()
    try:
        with open(path, "w") as f:
            f.write(before.replace("Denied=DENY]", "Denied=DENY, Later=PUB]"))
        wait_for(lambda: send(mq, "Later", ak="producer1", secret="producer-secret").code
                 == ResponseCode.SUCCESS, timeout=5, what="the edit in force")  # fmt: skip
        with open(path, "w") as f:
            f.write("accounts: [broken\n")  # a bad file: the one before stays in force
        time.sleep(1.5)
        assert send(mq, "Later", ak="producer1", secret="producer-secret").code == 0
    finally:
        with open(path, "w") as f:
            f.write(before)


def test_acl_admin_codes(mq):
    path = mq.broker.config.acl_file
    info = call(mq, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
    assert info.code == ResponseCode.SUCCESS and info.ext_fields["brokerAddr"] == mq.broker_address
    counter = int(info.ext_fields["version"].split('"counter":')[1].split(",")[0])
    refused(call(mq, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                 {"accessKey": "sneaky01", "secretKey": "sneaky-secret", "admin": "true"},
                 ak="producer1", secret="producer-secret"),
            NOT_ADMIN.format(50))  # fmt: skip
    new = {"accessKey": "consumer1", "secretKey": "consumer-secret", "topicPerms": "Allowed=SUB",
           "defaultGroupPerm": "SUB"}  # fmt: skip
    assert call(mq, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, new).code == ResponseCode.SUCCESS
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    pull = {"consumerGroup": "cg", "topic": "Allowed", "queueId": 0, "queueOffset": 0,
            "maxMsgNums": 1, "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0}  # fmt: skip
    pulled = call(mq, RequestCode.PULL_MESSAGE, pull, ak="consumer1", secret="consumer-secret")
    assert pulled.code != ResponseCode.SYSTEM_ERROR, pulled
    short = {"accessKey": "consumer1", "secretKey": "short"}
    bad = call(mq, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, short)
    assert (
        bad.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED and "short" not in bad.remark
    )
    assert call(mq, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "consumer1"}).code == 0
    gone = call(mq, RequestCode.DELETE_ACL_CONFIG, {"accessKey": "consumer1"})
    assert gone.code == ResponseCode.DELETE_ACL_CONFIG_FAILED
    refused(call(mq, RequestCode.PULL_MESSAGE, pull, ak="consumer1", secret="consumer-secret"),
            "No acl config for consumer1")  # fmt: skip
    info = call(mq, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
    assert f'"counter":{counter + 2},' in info.ext_fields["version"]


def test_admin_commands(mq):
    runner = CliRunner()
    base = ["-n", mq.namesrv, "-b", mq.broker_address]

    def admin(*args: str):
        return runner.invoke(cli, ["admin", *args, *base])

    # the CLI here signs nothing: the admin code lets this host in first
    white = call(
        mq, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "127.0.0.1"}
    )
    assert white.code == ResponseCode.SUCCESS, white
    try:
        result = admin("update-acl-config", "-a", "cliuser1", "-s", "cliuser-secret", "-t",
                       "Allowed=PUB", "-m", "false", "--json")  # fmt: skip
        assert result.exit_code == 0, result.output
        with open(mq.broker.config.acl_file) as f:
            assert "accessKey: cliuser1" in f.read()
        result = admin("cluster-acl-config-version", "--json")
        assert result.exit_code == 0 and '"counter"' in result.output, result.output
        result = admin("delete-acl-config", "-a", "cliuser1")
        assert result.exit_code == 0 and "deleted" in result.output, result.output
        result = admin("update-global-white-addr", "-g", "10.1.1.1")
        assert result.exit_code == 0, result.output
        assert send(mq, "Allowed", ak=None).code == ResponseCode.SYSTEM_ERROR  # not white now
    finally:
        call(mq, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": ""})


def test_acl_admin_codes_without_acl(shared_broker):
    broker, _ = shared_broker
    with RemotingClient() as client:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})
        resp = client.invoke(broker.address, request)
    assert (
        resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The broker does not enable acl."
    )
