"""The data server (issue 53, item 4): the broker's public port is a process of its own that
serves SEND and PULL itself and relays everything else to the control server, which listens
on loopback only and sees each client as itself. Real processes: an embedded broker, the
independent wire client and shmq's own TCP clients."""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import threading

import pytest
import wire_client as wc
from waiting import wait_for

from e2e_helpers import free_port, listeners, socket_inodes
from shmq import LocalTransactionState, TransactionProducer
from shmq.broker.client.slots import ClientSlot
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.data_server.process import DataServerProcess
from shmq.broker.topic.config import TopicConfig
from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.client.types import MessageQueue, PullStatus
from shmq.message import Message
from shmq.remoting.codes import RequestCode, ResponseCode
from shmq.remoting.protocol import RemotingCommand

DATA_PATH_CODES = (
    RequestCode.SEND_MESSAGE,
    RequestCode.SEND_MESSAGE_V2,
    RequestCode.SEND_BATCH_MESSAGE,
    RequestCode.PULL_MESSAGE,
)
HEART_BEAT = 34
GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST = 203, 204
QUERY_CONSUMER_OFFSET = 14


@pytest.fixture(scope="module")
def served(shared_broker):
    """The shared broker, its namesrv, and the data-path requests its control server
    handled, by code (its handlers wrapped to count them)."""
    broker, namesrv = shared_broker
    counts: collections.Counter[int] = collections.Counter()
    server = broker.server
    for code in DATA_PATH_CODES:
        handler = server._handlers[code]

        def counted(request, conn, handler=handler):
            counts[request.code] += 1
            return handler(request, conn)

        server.register(code, counted)
    return broker, namesrv, counts


def test_the_public_port_is_the_data_servers_and_the_control_server_is_on_loopback(served):
    broker, _, _ = served
    data_pid = broker.data_server.proc.pid
    assert data_pid != os.getpid()
    with open(f"/proc/{data_pid}/comm") as f:
        assert f.read().strip() == "shmq-data"  # as ``top`` names it
    public_port = int(broker.address.rsplit(":", 1)[1])
    assert public_port != broker.server.port
    ((_, public),) = listeners(public_port)
    assert public in socket_inodes(data_pid) and public not in socket_inodes(os.getpid())
    ((control_ip, control),) = listeners(broker.server.port)
    assert control_ip == "127.0.0.1"
    assert control in socket_inodes(os.getpid())


def test_send_and_pull_are_served_by_the_data_server_the_rest_relayed(served):
    broker, _, counts = served
    broker.create_topic(TopicConfig("DsPlain", 1, 1))
    before = counts.copy()
    with wc.WireClient(broker.address) as c:
        for i in range(3):
            resp = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("ds-p", "DsPlain", 0, {}),
                          f"m{i}".encode())  # fmt: skip
            assert resp.code == wc.SUCCESS, resp
        batch = wc.batch_body([(0, b"b1", {}), (0, b"b2", {})])
        header = wc.send_header_v2("ds-p", "DsPlain", 0, {}) | {"m": "true"}
        assert c.call(wc.SEND_BATCH_MESSAGE, header, batch).code == wc.SUCCESS

        def pulled() -> list[bytes]:
            resp = c.call(wc.PULL_MESSAGE, wc.pull_header("ds-g", "DsPlain", 0, 0, sys_flag=4,
                                                          max_nums=8))  # fmt: skip
            return [r["body"] for r in wc.pulled_records(resp.body)] if resp.code == 0 else []

        want = [b"m0", b"m1", b"m2", b"b1", b"b2"]
        wait_for(lambda: pulled() == want, what="the five messages pulled")
        assert counts - before == collections.Counter()  # none reached the control server
        # a retry-topic send and a send that auto-creates its topic: relayed, and served
        retry = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("ds-p", "%RETRY%ds-g", 0, {}),
                       b"again")  # fmt: skip
        assert retry.code == wc.SUCCESS, retry
        created = c.call(wc.SEND_MESSAGE_V2, wc.send_header_v2("ds-p", "DsAutoMade", 0, {}),
                         b"new")  # fmt: skip
        assert created.code == wc.SUCCESS, created
        # a pull with no subscription and no heartbeat naming one: the control server says so
        unknown = c.call(wc.PULL_MESSAGE, wc.pull_header("ds-nobody", "DsPlain", 0, 0,
                                                         sys_flag=wc.SUSPEND))  # fmt: skip
        assert unknown.code == ResponseCode.SUBSCRIPTION_NOT_EXIST, unknown
    assert (counts - before)[RequestCode.SEND_MESSAGE_V2] == 2
    assert (counts - before)[RequestCode.PULL_MESSAGE] == 1


def heartbeat(client_id: str, group: str, topic: str) -> bytes:
    return json.dumps({
        "clientID": client_id,
        "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "unitMode": False,
            "subscriptionDataSet": [{
                "classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                "subString": "*", "subVersion": 1, "tagsSet": [], "topic": topic}],
        }],
        "producerDataSet": [{"groupName": f"{group}-p"}],
    }).encode()  # fmt: skip


def test_the_control_server_sees_the_clients_address_and_pushes_reach_it(served):
    """A heartbeat goes through the relay: the connection lists show the client's own
    address; a pull naming no subscription is served by the data server from the
    heartbeat's; a second member's heartbeat makes the broker push
    NOTIFY_CONSUMER_IDS_CHANGED to the first, through its link."""
    broker, _, counts = served
    broker.create_topic(TopicConfig("DsBeat", 1, 1))
    with wc.WireClient(broker.address) as a, wc.WireClient(broker.address) as b:
        assert a.call(HEART_BEAT, {}, heartbeat("a@1", "ds-beat", "DsBeat")).code == wc.SUCCESS
        before = counts.copy()
        resp = a.call(wc.PULL_MESSAGE, wc.pull_header("ds-beat", "DsBeat", 0, 0, sys_flag=0))
        assert resp.code in (wc.PULL_NOT_FOUND, wc.PULL_OFFSET_MOVED), resp
        assert counts - before == collections.Counter()
        assert b.call(HEART_BEAT, {}, heartbeat("b@2", "ds-beat", "DsBeat")).code == wc.SUCCESS
        with wc.WireClient(broker.address) as admin:
            consumers = admin.call(GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "ds-beat"})
            producers = admin.call(GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "ds-beat-p"})
        addrs = {"{}:{}".format(*s.getsockname()[:2]) for s in (a.sock, b.sock)}
        listed = {c["clientAddr"] for c in wc.fastjson_loads(consumers.body)["connectionSet"]}
        assert listed == addrs
        listed = {c["clientAddr"] for c in wc.fastjson_loads(producers.body)["connectionSet"]}
        assert listed == addrs
        a.sock.settimeout(10)
        pushed = a.read()
        assert pushed.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
        assert pushed.ext["consumerGroup"] == "ds-beat"


def test_a_wrong_relay_secret_is_refused_and_a_client_cannot_name_itself(served):
    broker, _, _ = served
    forged = RemotingCommand.request(
        RequestCode.RELAY_HELLO, {"peer": "10.9.9.9:1", "tls": "false", "token": "0" * 64},
        oneway=True,
    ).encode()  # fmt: skip
    for address in (broker.server.address, broker.address):  # control, and through the relay
        with socket.create_connection(address.rsplit(":", 1), timeout=10) as s:
            s.sendall(forged)
            assert s.recv(1) == b"", "the connection stays open"


def test_a_client_cannot_send_the_data_servers_internal_requests(served):
    """A RELAY_PULLED would commit a group's offset past the ACL hook, and a RELAY_METRICS
    feed the broker's metrics: the data server closes a client that sends one, and the
    control server never sees it."""
    broker, _, _ = served
    topic, group = "DataServerForged", "data-server-forged"
    broker.create_topic(TopicConfig(topic, 1, 1))
    forged = [
        RemotingCommand.request(
            RequestCode.RELAY_PULLED,
            {"group": group, "topic": topic, "queueId": 0, "size": 0, "commitOffset": 7},
            oneway=True,
        ),
        RemotingCommand.request(RequestCode.RELAY_METRICS, {"token": "0" * 64}, oneway=True),
    ]
    for request in forged:
        with socket.create_connection(broker.address.rsplit(":", 1), timeout=10) as s:
            s.sendall(request.encode())
            assert s.recv(1) == b"", "the connection stays open"
    assert broker.offsets.query(group, topic, 0) < 0  # never committed


def test_tcp_producer_and_pull_consumer_go_through_the_data_server(served):
    broker, namesrv, counts = served
    broker.create_topic(TopicConfig("DsClients", 2, 2))
    before = counts.copy()
    with Producer("ds-clients-p", namesrv, transport="tcp") as producer:
        for i in range(40):
            producer.send(Message("DsClients", f"c{i}".encode()))
    got = []
    with QueueReader("ds-clients-g", namesrv, transport="tcp") as reader:
        for qid in (0, 1):
            mq, offset = MessageQueue("DsClients", "broker-a", qid), 0
            while True:
                result = reader.pull(mq, offset, 32, timeout=0.2)
                if result.pull_status is not PullStatus.FOUND:
                    break
                got += [m.body for m in result.messages]
                offset = result.next_begin_offset
    assert sorted(got) == sorted(f"c{i}".encode() for i in range(40))
    assert counts - before == collections.Counter()


def test_a_killed_data_server_comes_back_on_its_port_and_clients_go_on(make_broker):
    broker, namesrv = make_broker()
    broker.create_topic(TopicConfig("DsKill", 1, 1))
    address, first = broker.address, broker.data_server.proc.pid
    acked: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer("ds-kill-p", namesrv, transport="tcp") as producer:
            i = 0
            while not stop.is_set():
                body = f"k{i}".encode()
                try:
                    producer.send(Message("DsKill", body))
                except Exception:  # the data server is down: the send is not acked
                    continue
                acked.append(body)
                i += 1

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_for(lambda: len(acked) >= 50, what="50 sends acked")
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: broker.data_server.proc.pid != first and broker.data_server.proc
                 .is_alive(), what="the data server restarted")  # fmt: skip
        assert broker.address == address
        n = len(acked)
        wait_for(lambda: len(acked) >= n + 50, timeout=60, what="sends acked after the restart")
    finally:
        stop.set()
        thread.join(30)
    with QueueReader("ds-kill-g", namesrv, transport="tcp") as reader:
        mq = MessageQueue("DsKill", "broker-a", 0)
        stored: list[bytes] = []

        def all_read() -> bool:
            result = reader.pull(mq, len(stored), 256, timeout=0.2)
            if result.pull_status is PullStatus.FOUND:
                stored.extend(m.body for m in result.messages)
            return set(acked) <= set(stored)

        wait_for(all_read, timeout=30, what="every acked message stored")


class CommitOnCheck:
    """A transaction listener that leaves its transaction open and commits when asked."""

    def __init__(self) -> None:
        self.asked: list[bytes] = []

    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg):
        self.asked.append(msg.body)
        return LocalTransactionState.COMMIT_MESSAGE


def test_a_transaction_check_back_reaches_a_tcp_producer_through_the_relay(make_broker):
    broker, namesrv = make_broker(transaction_time_out=1000, transaction_check_interval=500)
    broker.create_topic(TopicConfig("DsTx", 1, 1))
    listener = CommitOnCheck()
    with TransactionProducer("ds-tx", namesrv, listener=listener, transport="tcp") as p:
        p.send_message_in_transaction(Message("DsTx", b"checked"))
        wait_for(lambda: listener.asked == [b"checked"], what="the broker's check-back")
    with QueueReader("ds-tx-g", namesrv, transport="tcp") as reader:
        mq = MessageQueue("DsTx", "broker-a", 0)
        got = wait_for(lambda: reader.pull(mq, 0, 8, timeout=0.2).messages, what="committed")
    assert [m.body for m in got] == [b"checked"]


def test_a_relayed_request_does_not_overtake_a_pull_before_it(served):
    """A connection's requests keep their order across the two servers: a pull that commits
    an offset, pipelined with the offset query right behind it (relayed), is answered with
    that offset, as when one server handled both."""
    broker, _, _ = served
    broker.create_topic(TopicConfig("DsOrder", 1, 1))
    with wc.WireClient(broker.address) as c:
        for offset in range(1, 21):
            c.send(wc.PULL_MESSAGE, wc.pull_header(
                "ds-order", "DsOrder", 0, 0, commit_offset=offset,
                sys_flag=wc.COMMIT_OFFSET | wc.SUBSCRIPTION))  # fmt: skip
            query = c.send(QUERY_CONSUMER_OFFSET, {"consumerGroup": "ds-order",
                                                   "topic": "DsOrder", "queueId": "0"})  # fmt: skip
            assert c.receive(query).ext["offset"] == str(offset)


def _committed(broker_address: str, group: str, topic: str) -> str:
    """The group's committed offset of queue 0, asked on a connection of its own."""
    with wc.WireClient(broker_address) as c:
        query = c.send(QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic,
                                               "queueId": "0"})  # fmt: skip
        return c.receive(query).ext.get("offset", "")


def test_a_connections_pull_accounts_go_to_the_broker_together_and_on_their_own(served):
    """A connection's pulls in a row tell the control server their gets and commits in one
    RELAY_PULLED, not one each (each woke the supervisor: a pull's round trip doubled); the
    last commit arrives on its own shortly after, and when the client leaves at once."""
    broker, _, _ = served
    broker.create_topic(TopicConfig("DsAccounts", 1, 1))
    server = broker.server
    relayed = []
    handler = server._internal[RequestCode.RELAY_PULLED]

    def counted(request, conn):
        relayed.append(request)
        return handler(request, conn)

    server.register_internal(RequestCode.RELAY_PULLED, counted)
    try:
        with wc.WireClient(broker.address) as c:
            for offset in range(1, 41):  # each answered (PULL_NOT_FOUND) before the next
                pull = c.send(wc.PULL_MESSAGE, wc.pull_header(
                    "ds-accounts", "DsAccounts", 0, 0, commit_offset=offset,
                    sys_flag=wc.COMMIT_OFFSET | wc.SUBSCRIPTION))  # fmt: skip
                c.receive(pull)
            wait_for(lambda: _committed(broker.address, "ds-accounts", "DsAccounts") == "40",
                     timeout=5.0, what="the last commit, with no request behind it")  # fmt: skip
        assert 1 <= len(relayed) < 40
        with wc.WireClient(broker.address) as c:  # a client that leaves right after its pull
            pull = c.send(wc.PULL_MESSAGE, wc.pull_header(
                "ds-accounts", "DsAccounts", 0, 0, commit_offset=41,
                sys_flag=wc.COMMIT_OFFSET | wc.SUBSCRIPTION))  # fmt: skip
            c.receive(pull)
        wait_for(lambda: _committed(broker.address, "ds-accounts", "DsAccounts") == "41",
                 timeout=5.0, what="the commit of a client that left")  # fmt: skip
    finally:
        server.register_internal(RequestCode.RELAY_PULLED, handler)


def test_the_configured_port_stays_bound_until_the_data_server_takes_it():
    """While the broker starts, its control server binds any free loopback port, and the
    kernel once handed it the port the data server was about to take (CI: "Address already
    in use"). The supervisor's side holds that port bound from the start until ``serve``
    (or a stop); port 0 holds nothing."""
    port = free_port()
    config = BrokerConfig().replace(brokerIP1="127.0.0.1", listenPort=str(port))
    slot = ClientSlot("consumer", 0, 1, os.getpid(), "g", None, "/no-sem")
    data = DataServerProcess(config, "/no-prefix", 20, {}, slot, None)
    probe = socket.socket()
    try:
        with pytest.raises(OSError):
            probe.bind(("127.0.0.1", port))
        data.stop()
        probe.bind(("127.0.0.1", port))
    finally:
        probe.close()
        data.stop()
    anywhere = DataServerProcess(BrokerConfig().replace(listenPort="0"), "/p", 20, {}, slot, None)
    assert anywhere._reserved is None
