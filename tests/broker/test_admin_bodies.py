"""The admin answers mqadmin parses, read with the independent wire client as fastjson reads
them into RocketMQ 4.9's classes: field names, nesting and value types of TopicStatsTable,
ConsumeStats, TopicConfigSerializeWrapper, SubscriptionGroupWrapper, KVTable (runtime
info), ConsumerConnection, ProducerConnection, ClusterInfo and TopicList."""

from __future__ import annotations

import json
import os

import pytest
import wire_client as wc
from test_remoting_send import dispatched, send
from waiting import wait_for

GET_ALL_TOPIC_CONFIG, GET_BROKER_CONFIG, GET_BROKER_RUNTIME_INFO, HEART_BEAT = 21, 26, 28, 34
GET_BROKER_CLUSTER_INFO = 106
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_TOPIC_STATS_INFO = 201, 202
GET_CONSUMER_CONNECTION_LIST, GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_CONSUME_STATS = 203, 206, 208
GET_PRODUCER_CONNECTION_LIST = 204
GET_BROKER_CONSUME_STATS = 317
INVOKE_BROKER_TO_RESET_OFFSET = 222

MESSAGE_QUEUE = {"brokerName": str, "queueId": int, "topic": str}


def call(address: str, code: int, ext: dict[str, str] | None = None) -> tuple[dict, bytes]:
    with wc.WireClient(address) as c:
        resp = c.call(code, ext or {})
    assert resp.code == wc.SUCCESS, resp
    return wc.fastjson_loads(resp.body), resp.body


def fields(obj: dict, types: dict[str, type]) -> None:
    """``obj`` has exactly these fields, of these types (bool is not an int here)."""
    assert set(obj) == set(types), obj
    for name, kind in types.items():
        value = obj[name]
        assert isinstance(value, kind) and (kind is bool or not isinstance(value, bool)), (
            name, value
        )  # fmt: skip


def queue_map(table: dict, value_types: dict[str, type]) -> dict[tuple[str, int], dict]:
    """A ``Map<MessageQueue, X>``: every key a MessageQueue object, every value an X."""
    out = {}
    for key, value in table.items():
        assert isinstance(key, tuple), f"a MessageQueue key is an object, not {key!r}"
        mq = dict(key)
        fields(mq, MESSAGE_QUEUE)
        fields(value, value_types)
        out[(mq["topic"], mq["queueId"])] = value
    return out


def test_stats_bodies_as_mqadmin_reads_them(shared_broker):
    broker, _ = shared_broker
    for i in range(3):
        assert send(broker, "AdmStats", 1, {"TAGS": "a"}, f"m{i}".encode()).code == wc.SUCCESS
    dispatched(broker, "AdmStats", 1, 3)

    stats, raw = call(broker.address, GET_TOPIC_STATS_INFO, {"topic": "AdmStats"})
    assert raw.startswith(b'{"offsetTable":{{"brokerName":')  # object keys, as fastjson
    assert set(stats) == {"offsetTable"}
    offsets = queue_map(stats["offsetTable"], dict.fromkeys(
        ("lastUpdateTimestamp", "maxOffset", "minOffset"), int))  # fmt: skip
    assert offsets[("AdmStats", 1)]["maxOffset"] == 3
    assert offsets[("AdmStats", 1)]["lastUpdateTimestamp"] > 0
    assert offsets[("AdmStats", 0)] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}

    with wc.WireClient(broker.address) as c:
        header = wc.offset_header("adm-g", "AdmStats", 1, 2)
        assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS
    consume, _ = call(broker.address, GET_CONSUME_STATS, {"consumerGroup": "adm-g"})
    assert set(consume) == {"consumeTps", "offsetTable"}
    assert isinstance(consume["consumeTps"], float)
    wrappers = queue_map(consume["offsetTable"], dict.fromkeys(
        ("brokerOffset", "consumerOffset", "lastTimestamp"), int))  # fmt: skip
    assert wrappers[("AdmStats", 1)]["brokerOffset"] == 3
    assert wrappers[("AdmStats", 1)]["consumerOffset"] == 2
    assert wrappers[("AdmStats", 1)]["lastTimestamp"] > 0


def test_broker_consume_stats_as_mqadmin_reads_it(shared_broker):
    """ConsumeStatsList: per subscription group a list of ConsumeStats, one per topic the
    group has offsets on; the total lag; with isOrder, ordered topics only."""
    broker, _ = shared_broker
    for i in range(3):
        assert send(broker, "AdmBroker", 0, {}, f"m{i}".encode()).code == wc.SUCCESS
    dispatched(broker, "AdmBroker", 0, 3)
    with wc.WireClient(broker.address) as c:
        header = wc.offset_header("adm-broker-g", "AdmBroker", 0, 1)
        assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS
    stats, raw = call(broker.address, GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
    fields(stats, {"brokerAddr": str, "consumeStatsList": list, "totalDiff": int})
    assert raw.startswith(b'{"brokerAddr":"') and stats["brokerAddr"] == broker.address
    groups = {}
    for entry in stats["consumeStatsList"]:
        ((group, consume_stats),) = entry.items()  # Map<group, List<ConsumeStats>>
        groups[group] = consume_stats
    assert "TOOLS_CONSUMER" in groups  # every subscription group, system ones too
    (topic_stats,) = groups["adm-broker-g"]
    fields(topic_stats, {"consumeTps": float, "offsetTable": dict})
    wrappers = queue_map(topic_stats["offsetTable"], dict.fromkeys(
        ("brokerOffset", "consumerOffset", "lastTimestamp"), int))  # fmt: skip
    assert (wrappers[("AdmBroker", 0)]["brokerOffset"], wrappers[("AdmBroker", 0)][
        "consumerOffset"]) == (3, 1)  # fmt: skip
    assert stats["totalDiff"] >= 2  # other tests' groups lag too
    ordered, _ = call(broker.address, GET_BROKER_CONSUME_STATS, {"isOrder": "true"})
    assert {"adm-broker-g": []} in ordered["consumeStatsList"]  # no ordered topic here


def test_reset_offset_body_as_mqadmin_reads_it(shared_broker):
    broker, _ = shared_broker
    for i in range(2):
        assert send(broker, "AdmReset", 0, {}, f"m{i}".encode()).code == wc.SUCCESS
    dispatched(broker, "AdmReset", 0, 2)
    with wc.WireClient(broker.address) as c:
        header = wc.offset_header("adm-reset-g", "AdmReset", 0, 2)
        assert c.call(wc.UPDATE_CONSUMER_OFFSET, header).code == wc.SUCCESS
    ext = {"topic": "AdmReset", "group": "adm-reset-g", "timestamp": "0", "isForce": "true"}
    reset, raw = call(broker.address, INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert raw.startswith(b'{"offsetTable":{{"brokerName":')  # ResetOffsetBody, as fastjson
    assert set(reset) == {"offsetTable"}
    table = {}
    for key, offset in reset["offsetTable"].items():
        mq = dict(key)
        fields(mq, MESSAGE_QUEUE)
        assert isinstance(offset, int) and not isinstance(offset, bool)
        table[(mq["topic"], mq["queueId"])] = offset
    assert table[("AdmReset", 0)] == 0


def test_config_bodies_as_mqadmin_reads_them(shared_broker):
    broker, _ = shared_broker
    assert send(broker, "AdmConfig", 0, {}).code == wc.SUCCESS
    topics, _ = call(broker.address, GET_ALL_TOPIC_CONFIG)
    assert set(topics) == {"dataVersion", "topicConfigTable"}
    fields(topics["dataVersion"], {"counter": int, "timestamp": int})
    for name, cfg in topics["topicConfigTable"].items():
        fields(cfg, {"order": bool, "perm": int, "readQueueNums": int, "topicFilterType": str,
                     "topicName": str, "topicSysFlag": int, "writeQueueNums": int})  # fmt: skip
        assert cfg["topicName"] == name
    assert "AdmConfig" in topics["topicConfigTable"]

    groups, _ = call(broker.address, GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    assert set(groups) == {"dataVersion", "subscriptionGroupTable"}
    fields(groups["dataVersion"], {"counter": int, "timestamp": int})
    assert groups["subscriptionGroupTable"], "RocketMQ's system groups at least"
    for name, cfg in groups["subscriptionGroupTable"].items():
        fields(cfg, {"brokerId": int, "consumeBroadcastEnable": bool, "consumeEnable": bool,
                     "consumeFromMinEnable": bool, "consumeMessageOrderly": bool,
                     "groupName": str, "notifyConsumerIdsChangedEnable": bool, "retryMaxTimes": int,
                     "retryQueueNums": int, "whichBrokerWhenConsumeSlowly": int})  # fmt: skip
        assert cfg["groupName"] == name


def test_runtime_info_is_a_kv_table_clusterlist_can_read(shared_broker):
    broker, _ = shared_broker
    assert send(broker, "AdmRuntime", 0, {}).code == wc.SUCCESS
    info, _ = call(broker.address, GET_BROKER_RUNTIME_INFO)
    assert set(info) == {"table"}
    table = info["table"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())
    # what ClusterListSubCommand parses (Long.parseLong / split(" ") + parseDouble)
    for key in (
        "msgPutTotalYesterdayMorning",
        "msgPutTotalTodayMorning",
        "msgPutTotalTodayNow",
        "msgGetTotalYesterdayMorning",
        "msgGetTotalTodayMorning",
        "msgGetTotalTodayNow",
    ):
        int(table[key])
    assert int(table["msgPutTotalTodayNow"]) >= 1
    for key in ("putTps", "getTransferedTps"):
        assert len([float(x) for x in table[key].split(" ")]) == 3
    for key in (
        "sendThreadPoolQueueSize",
        "pullThreadPoolQueueSize",
        "pageCacheLockTimeMills",
        "sendThreadPoolQueueHeadWaitTimeMills",
        "pullThreadPoolQueueHeadWaitTimeMills",
    ):
        int(table[key])
    assert 0 <= float(table["commitLogDiskRatio"]) <= 1
    assert table["brokerVersionDesc"]
    assert json.loads(table["shmqRuntimeInfo"])["broker"] == broker.config.broker_name


def test_consumer_connection_as_mqadmin_reads_it(shared_broker):
    broker, _ = shared_broker
    heartbeat = {
        "clientID": "10.0.0.7@42#1",
        "consumerDataSet": [{
            "groupName": "adm-conn-g", "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "unitMode": False,
            "subscriptionDataSet": [{
                "classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                "subString": "*", "subVersion": 1, "tagsSet": [], "topic": "AdmConn"}],
        }],
        "producerDataSet": [],
    }  # fmt: skip
    with wc.WireClient(broker.address) as member:  # stays online while connected
        assert member.call(HEART_BEAT, {}, json.dumps(heartbeat).encode()).code == wc.SUCCESS
        conn, _ = call(broker.address, GET_CONSUMER_CONNECTION_LIST,
                       {"consumerGroup": "adm-conn-g"})  # fmt: skip
    fields(conn, {"connectionSet": list, "consumeFromWhere": str, "consumeType": str,
                  "messageModel": str, "subscriptionTable": dict})  # fmt: skip
    (member_conn,) = conn["connectionSet"]
    fields(member_conn, {"clientAddr": str, "clientId": str, "language": str, "version": int})
    assert member_conn["clientId"] == "10.0.0.7@42#1"
    # the language and version its request header named
    assert (member_conn["language"], member_conn["version"]) == ("JAVA", wc.VERSION_4_9_4)
    assert (conn["consumeType"], conn["messageModel"], conn["consumeFromWhere"]) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")  # fmt: skip
    assert conn["subscriptionTable"]["AdmConn"]["subString"] == "*"


@pytest.mark.parametrize("encoding", [wc.JSON, wc.ROCKETMQ])
def test_producer_connection_as_mqadmin_reads_it(shared_broker, encoding):
    """Producers that heartbeat over TCP, with the language and version of their headers,
    and this host's ring producers of the group, which do not heartbeat; a group nobody
    produces for is SYSTEM_ERROR, as 4.9 answers it."""
    from shmq.client.producer.producer import Producer
    from shmq.message import Message

    broker, namesrv = shared_broker
    group = f"adm-prod-g{encoding}"
    assert send(broker, "AdmProd", 0, {}).code == wc.SUCCESS
    beat = {"clientID": f"10.0.0.8@43#{encoding}", "producerDataSet": [{"groupName": group}],
            "consumerDataSet": []}  # fmt: skip
    with (
        wc.WireClient(broker.address, encoding) as member,
        Producer(group, namesrv) as ring_producer,
    ):
        assert member.call(HEART_BEAT, {}, json.dumps(beat).encode()).code == wc.SUCCESS
        ring_producer.send(Message("AdmProd", b"x"))
        conn, _ = call(broker.address, GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})

    def gone():  # once the broker saw the member's connection close
        with wc.WireClient(broker.address) as c:
            resp = c.call(GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        return resp if resp.code != wc.SUCCESS else None

    fields(conn, {"connectionSet": list})
    by_id = {c["clientId"]: c for c in conn["connectionSet"]}
    for c in by_id.values():
        fields(c, {"clientAddr": str, "clientId": str, "language": str, "version": int})
    tcp = by_id.pop(f"10.0.0.8@43#{encoding}")
    assert (tcp["language"], tcp["version"]) == ("JAVA", wc.VERSION_4_9_4)
    (ring,) = by_id.values()
    assert ring["clientId"] == f"{broker.config.broker_ip1}@{os.getpid()}"
    assert (ring["clientAddr"], ring["language"]) == ("shared memory", "PYTHON")
    refused = wait_for(gone, what=f"the broker to forget producer group {group}")
    assert (refused.code, refused.remark) == (
        wc.SYSTEM_ERROR, f"the producer group[{group}] not exist")  # fmt: skip


def test_broker_config_as_mqadmin_reads_it(shared_broker):
    """Every broker and store key as properties text (``key=value`` lines, read by
    ``MixAll.string2Properties``), defaults too; the header's version a DataVersion."""
    broker, _ = shared_broker
    with wc.WireClient(broker.address) as c:
        resp = c.call(GET_BROKER_CONFIG, {})
    assert resp.code == wc.SUCCESS, resp
    lines = resp.body.decode().splitlines()
    config = dict(line.split("=", 1) for line in lines)
    assert len(config) == len(lines) > 60
    cfg = broker.config
    assert config["brokerName"] == cfg.broker_name
    assert config["listenPort"] == str(cfg.listen_port)
    assert config["brokerRole"] == "ASYNC_MASTER" and config["flushDiskType"] == "ASYNC_FLUSH"
    assert config["mappedFileSizeCommitLog"] == str(cfg.store.mapped_file_size_commit_log)
    assert config["storeReplyMessageEnable"] == "true"  # a default, listed all the same
    fields(wc.fastjson_loads(resp.ext["version"].encode()), {"counter": int, "timestamp": int})


def test_namesrv_bodies_as_mqadmin_reads_them(shared_broker):
    broker, namesrv = shared_broker
    assert send(broker, "AdmList", 0, {}).code == wc.SUCCESS
    wait_for(lambda: "AdmList" in call(namesrv, GET_ALL_TOPIC_LIST_FROM_NAMESERVER)[0]["topicList"],
             what="AdmList in the namesrv's topic list")  # fmt: skip
    topics, _ = call(namesrv, GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert set(topics) == {"topicList"} and all(isinstance(t, str) for t in topics["topicList"])

    info, raw = call(namesrv, GET_BROKER_CLUSTER_INFO)
    assert b'"brokerAddrs":{0:"' in raw  # Long keys bare, as fastjson writes them
    fields(info, {"brokerAddrTable": dict, "clusterAddrTable": dict})
    data = info["brokerAddrTable"][broker.config.broker_name]
    fields(data, {"brokerAddrs": dict, "brokerName": str, "cluster": str})
    assert data["brokerAddrs"] == {0: broker.address}
    assert info["clusterAddrTable"] == {data["cluster"]: [broker.config.broker_name]}
