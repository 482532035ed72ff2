"""ACL 1.0 on the gRPC proxy: a RocketMQ 5 client's ``authorization`` header (HMAC-SHA1 of
``x-mq-date-time``) is checked against plain_acl.yml; who is not established answers
UNAUTHORIZED (40100), a missing permission ends the call with PERMISSION_DENIED; what the
proxy then asks the broker passes the broker's ACL with the proxy's own account."""

from __future__ import annotations

import time

import grpc
import pytest
from grpc_client import Client, message

from e2e_helpers import embedded
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode
from shmq.remoting.security import signature

ACL = """\
accounts:
  - accessKey: producer1
    secretKey: producer-secret
    defaultTopicPerm: DENY
    topicPerms: [Allowed=PUB, Denied=DENY]
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
"""


@pytest.fixture(scope="module")
def mq(tmp_path_factory):
    root = tmp_path_factory.mktemp("acl")
    (root / "plain_acl.yml").write_text(ACL)
    conf = {"acl_enable": True, "acl_file": str(root / "plain_acl.yml"), "proxy_enable": True,
            "grpc_server_port": 0}  # fmt: skip
    with embedded(str(root / "store"), **conf) as broker:
        with RemotingClient(credentials=("operator1", "operator-secret")) as client:
            for topic in ("Allowed", "Denied"):
                fields = {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
                client.invoke_json(broker.broker_address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                                   fields)  # fmt: skip
        yield broker


def grpc_client(mq, ak: str | None, secret: str = "") -> Client:
    client = Client(mq.grpc_address)
    if ak is not None:
        date_time = time.strftime("%Y%m%dT%H%M%SZ")
        sig = signature.grpc_signature(date_time, secret)
        client.metadata += [("x-mq-date-time", date_time), ("authorization",
                            f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, "
                            f"Signature={sig}")]  # fmt: skip
    return client


def test_grpc_with_and_without_a_valid_authorization(mq):
    request = spb.SendMessageRequest(messages=[message("Allowed")])
    for ak, secret in ((None, ""), ("producer1", "wrong-secret")):
        client = grpc_client(mq, ak, secret)
        try:
            response = client.call("SendMessage", request)
        finally:
            client.close()
        assert response.status.code == pb.Code.UNAUTHORIZED, response
    client = grpc_client(mq, "producer1", "producer-secret")
    try:
        response = client.call("SendMessage", request)
        assert response.status.code == pb.Code.OK, response
        denied = spb.SendMessageRequest(messages=[message("Denied")])
        with pytest.raises(grpc.RpcError) as err:
            client.call("SendMessage", denied)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "No permission for topic:Denied" in err.value.details()
    finally:
        client.close()
