"""SlaveSynchronize: a slave's copy of its master's topics, offsets, delay offsets and
subscription groups, against a real master broker (its agents real processes) and against
a peer that answers garbage. The slave side runs in this process on its own config dir."""

from __future__ import annotations

import os

import pytest
from waiting import wait_for

from shmq import json_file
from shmq.broker.config.broker_config import BrokerConfig
from shmq.broker.ha.slave_sync import SlaveSynchronize
from shmq.broker.live_config import LiveConfig
from shmq.broker.offset.consumer_offsets import ConsumerOffsetManager
from shmq.broker.subscription.groups import SubscriptionGroupManager
from shmq.broker.topic.config import TopicConfigManager
from shmq.client.producer.producer import Producer
from shmq.message import Message
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RemotingCommand, RequestCode
from shmq.remoting.server import RemotingServer


class SlaveStandIn:
    """What SlaveSynchronize uses of a slave broker: its config and tables on ``root``, its
    advertised ``address`` and its topic table (``publish``, counted)."""

    def __init__(self, root: str, role: str = "SLAVE") -> None:
        config_dir = os.path.join(root, "config")
        self.root = root
        self.settings = LiveConfig(BrokerConfig().replace(
            storePathRootDir=root, broker_role=role, broker_id=int(role == "SLAVE")))  # fmt: skip
        self.topics = TopicConfigManager(config_dir)
        self.subscription_groups = SubscriptionGroupManager(config_dir)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.address = "127.0.0.1:1"
        self.published = 0

    def publish(self) -> None:
        self.published += 1

    def synchronize(self, client: RemotingClient) -> SlaveSynchronize:
        return SlaveSynchronize(self.settings, lambda: self.address, client, self.topics, self,
                                self.subscription_groups, self.offsets)  # fmt: skip


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def delivered(path: str) -> int:
    """Level 1's next offset in delayOffset.json (0 before the file is written)."""
    data = json_file.load(path, lambda t: json_file.loads_fastjson(t, int_keys=True)) or {}
    return data.get("offsetTable", {}).get(1, 0)


@pytest.mark.slow
def test_a_slave_copies_the_masters_tables_and_persists_them(make_broker, tmp_path):
    master, namesrv = make_broker()
    with RemotingClient() as client:
        client.invoke_json(master.address, RequestCode.UPDATE_AND_CREATE_TOPIC,
                           {"topic": "SyncT", "readQueueNums": 2, "writeQueueNums": 2})  # fmt: skip
        client.invoke_json(master.address, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                           body_obj={"groupName": "sync-g", "retryMaxTimes": 3})  # fmt: skip
        for qid, offset in ((0, 12), (1, 7)):
            client.invoke_json(master.address, RequestCode.UPDATE_CONSUMER_OFFSET,
                               {"consumerGroup": "sync-g", "topic": "SyncT", "queueId": qid,
                                "commitOffset": offset})  # fmt: skip
        with Producer("sync-p", namesrv) as producer:  # a delivered delayed message
            producer.send(Message("SyncT", b"later", delay_level=1))
        delay_file = os.path.join(master.root, "config", "delayOffset.json")
        wait_for(lambda: delivered(delay_file) >= 1, what=f"{delay_file} to record the delivery")

        # RocketMQ's body shapes: consumer offsets with bare queue ids, delay offsets as stored
        answer = client.invoke(master.address, RemotingCommand.request(
            RequestCode.GET_ALL_CONSUMER_OFFSET))  # fmt: skip
        assert '"SyncT@sync-g":{' in answer.body.decode().replace("\n", "").replace("\t", "")
        assert json_file.loads_fastjson(answer.body.decode())["offsetTable"]["SyncT@sync-g"] == {
            0: 12, 1: 7}  # fmt: skip

        slave = SlaveStandIn(str(tmp_path / "slave"))
        sync = slave.synchronize(client)
        assert not sync.sync_all()  # no master known yet
        sync.set_master(master.address)
        assert sync.sync_all()
        answer = client.invoke(master.address, RemotingCommand.request(
            RequestCode.GET_ALL_DELAY_OFFSET))  # fmt: skip
        assert answer.body.decode() == read(delay_file)

    config = os.path.join(slave.root, "config")
    assert slave.topics.get("SyncT").read_queue_nums == 2
    assert slave.topics.data_version == master.topics.data_version
    assert slave.published == 1
    assert slave.subscription_groups.get("sync-g").retry_max_times == 3
    assert slave.offsets.offsets("sync-g", "SyncT") == {0: 12, 1: 7}
    reloaded = SlaveStandIn(slave.root)  # persisted in the slave's own files
    assert reloaded.topics.get("SyncT") is not None
    assert reloaded.subscription_groups.get("sync-g").retry_max_times == 3
    assert reloaded.offsets.offsets("sync-g", "SyncT") == {0: 12, 1: 7}
    assert read(os.path.join(config, "delayOffset.json")) == answer.body.decode()
    assert delivered(os.path.join(config, "delayOffset.json")) == 1

    # an unchanged dataVersion copies nothing; a slave never copies from itself or as a master
    with RemotingClient() as client:
        sync.client = client
        assert sync.sync_all() and slave.published == 1
        slave.address = master.address
        assert not sync.sync_all()
        slave.address = "127.0.0.1:1"
        slave.settings.current = slave.settings.current.replace(broker_role="ASYNC_MASTER",
                                                                broker_id=0)  # fmt: skip
        assert not sync.sync_all()


def test_garbage_from_the_master_changes_nothing_and_stops_nothing(tmp_path, caplog):
    bodies = {
        RequestCode.GET_ALL_TOPIC_CONFIG: b'{"topicConfigTable":{"A":{"topicName":"B"}}}',
        RequestCode.GET_ALL_CONSUMER_OFFSET: b'{"offsetTable":{"no-separator":{0:1}}}',
        RequestCode.GET_ALL_DELAY_OFFSET: b"[1,2]",
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: b"\xff\xfe not text",
    }
    server = RemotingServer("127.0.0.1", 0, name="garbage-master")
    for code, body in bodies.items():
        server.register(code, lambda req, _c, b=body: RemotingCommand.response_to(req, body=b))
    server.start()
    try:
        with RemotingClient() as client:
            slave = SlaveStandIn(str(tmp_path / "slave"))
            before = (slave.topics.data_version, slave.offsets.encode())
            sync = slave.synchronize(client)
            sync.set_master(server.address)
            assert not sync.sync_all()
    finally:
        server.stop()
    assert (slave.topics.data_version, slave.offsets.encode()) == before
    assert not os.path.exists(os.path.join(slave.root, "config", "delayOffset.json"))
    assert caplog.text.count("slave synchronize: cannot copy") == 4
