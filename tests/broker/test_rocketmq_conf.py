"""RocketMQ's own broker.conf files load: its keys are read, or ignored with one warning line
each naming the reason; a name that is no key at all is refused with the nearest key."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from e2e_helpers import shmq
from shmq.broker.config.broker_config import NOT_KEYS, BrokerConfig, camel_case, load_broker_config
from shmq.broker.config.rocketmq_keys import IGNORED_GROUPS, ignored_keys, ignored_reason
from shmq.config import MessageStoreConfig, snake_case
from shmq.errors import ConfigError

# Every key RocketMQ 4.9.0-4.9.8's BrokerStartup applies from a broker.conf: the setters of
# BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig (MixAll.
# properties2Object), and the two address-server keys it reads itself.
_KEYS_TEXT = """
accessMessageInMemoryMaxRatio aclEnable adminBrokerThreadPoolNums autoCreateSubscriptionGroup
autoCreateTopicEnable autoDeleteUnusedStats bitMapLengthConsumeQueueExt brokerClusterName
brokerFastFailureEnable brokerIP1 brokerIP2 brokerId brokerName brokerPermission brokerRole
brokerTopicEnable channelNotActiveInterval checkCRCOnRecover cleanFileForciblyEnable
cleanResourceInterval clientAsyncSemaphoreValue clientCallbackExecutorThreads
clientChannelMaxIdleTimeSeconds clientCloseSocketIfTimeout clientManageThreadPoolNums
clientManagerThreadPoolQueueCapacity clientOnewaySemaphoreValue
clientPooledByteBufAllocatorEnable clientSocketRcvBufSize clientSocketSndBufSize
clientWorkerThreads clusterTopicEnable commercialBaseCount commercialBigCount commercialEnable
commercialTimerCount commercialTransCount commitCommitLogLeastPages
commitCommitLogThoroughInterval commitIntervalCommitLog compressedRegister configBlackList
connectTimeoutMillis consumerFallbehindThreshold consumerManageThreadPoolNums
consumerManagerThreadPoolQueueCapacity dLegerGroup dLegerPeers dLegerSelfId debugLockEnable
defaultQueryMaxNum defaultTopicQueueNums deleteCommitLogFilesInterval
deleteConsumeQueueFilesInterval deleteWhen destroyMapedFileIntervalForcibly
disableConsumeIfConsumerReadSlowly diskFallRecorded diskMaxUsedSpaceRatio duplicationEnable
enableBatchPush enableCalcFilterBitMap enableConsumeQueueExt enableDLegerCommitLog
enableDetailStat enableLmq enableMultiDispatch enablePropertyFilter enableScheduleAsyncDeliver
enableScheduleMessageStats endTransactionPoolQueueCapacity endTransactionThreadPoolNums
expectConsumerNumUseFilter fastFailIfNoBufferInStorePool fetchNamesrvAddrByAddressServer
fileReservedTime filterDataCleanTimeSpan filterServerNums filterSupportRetry
flushCommitLogLeastPages flushCommitLogThoroughInterval flushCommitLogTimed
flushConsumeQueueLeastPages flushConsumeQueueThoroughInterval
flushConsumerOffsetHistoryInterval flushConsumerOffsetInterval flushDelayOffsetInterval
flushDiskType flushIntervalCommitLog flushIntervalConsumeQueue
flushLeastPagesWhenWarmMapedFile forceRegister haHousekeepingInterval haListenPort
haMasterAddress haSendHeartbeatInterval haSlaveFallbehindMax haTransferBatchSize
heartbeatThreadPoolNums heartbeatThreadPoolQueueCapacity highSpeedMode isolateLogEnable
listenPort longPollingEnable mappedFileSizeCommitLog mappedFileSizeConsumeQueue
mappedFileSizeConsumeQueueExt maxDelayTime maxErrorRateOfBloomFilter maxHashSlotNum
maxIndexNum maxLmqConsumeQueueNum maxMessageSize maxMsgsNumBatch
maxTransferBytesOnMessageInDisk maxTransferBytesOnMessageInMemory
maxTransferCountOnMessageInDisk maxTransferCountOnMessageInMemory messageDelayLevel
messageIndexEnable messageIndexSafe messageStorePlugIn msgTraceTopicName namesrvAddr
notifyConsumerIdsChangedEnable offsetCheckInSlave osPageCacheBusyTimeOutMills
preferredLeaderId processReplyMessageThreadPoolNums pullMessageThreadPoolNums
pullThreadPoolQueueCapacity putMessageFutureThreadPoolNums putMsgIndexHightWater
putThreadPoolQueueCapacity queryMessageThreadPoolNums queryThreadPoolQueueCapacity
readOnlyCommitLogStorePaths redeleteHangedFileInterval regionId registerBrokerTimeoutMills
registerNameServerPeriod rejectTransactionMessage replyThreadPoolQueueCapacity
rmqAddressServerDomain rmqAddressServerSubGroup rocketmqHome
scheduleAsyncDeliverMaxPendingLimit scheduleAsyncDeliverMaxResendNum2Blocked
sendMessageThreadPoolNums sendThreadPoolQueueCapacity serverAsyncSemaphoreValue
serverCallbackExecutorThreads serverChannelMaxIdleTimeSeconds serverOnewaySemaphoreValue
serverPooledByteBufAllocatorEnable serverSelectorThreads serverSocketBacklog
serverSocketRcvBufSize serverSocketSndBufSize serverWorkerThreads shortPollingTimeMills
slaveReadEnable slaveTimeout startAcceptSendRequestTimeStamp storePathCommitLog
storePathDLedgerCommitLog storePathRootDir storeReplyMessageEnable syncFlushTimeout traceOn
traceTopicEnable transactionCheckInterval transactionCheckMax transactionTimeOut
transferMsgByHeap transientStorePoolEnable transientStorePoolSize useEpollNativeSelector
useReentrantLockWhenPutMessage useTLS waitTimeMillsInHeartbeatQueue waitTimeMillsInPullQueue
waitTimeMillsInSendQueue waitTimeMillsInTransactionQueue warmMapedFileEnable
writeBufferHighWaterMark writeBufferLowWaterMark
"""
ROCKETMQ_4_9_KEYS = frozenset(_KEYS_TEXT.split())


def _master(name: str, role: str = "ASYNC_MASTER") -> str:
    return (f"brokerClusterName=DefaultCluster\nbrokerName={name}\nbrokerId=0\ndeleteWhen=04\n"
            f"fileReservedTime=48\nbrokerRole={role}\nflushDiskType=ASYNC_FLUSH\n")  # fmt: skip


def _slave(name: str) -> str:
    return _master(name, "SLAVE").replace("brokerId=0", "brokerId=1")


# The key=value lines of RocketMQ 4.9's distribution/conf samples (the same in 4.9.0-4.9.8),
# each with the keys that load with a warning. conf/broker.conf spaces its `=`.
SAMPLES = {
    "broker.conf": (
        "\nbrokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\n"
        "deleteWhen = 04\nfileReservedTime = 48\nbrokerRole = ASYNC_MASTER\n"
        "flushDiskType = ASYNC_FLUSH\n",
        [],
    ),
    "2m-noslave/broker-a.properties": (_master("broker-a"), []),
    "2m-noslave/broker-b.properties": (_master("broker-b"), []),
    "2m-2s-sync/broker-a.properties": (_master("broker-a", "SYNC_MASTER"), []),
    "2m-2s-sync/broker-a-s.properties": (_slave("broker-a"), []),
    "2m-2s-async/broker-a.properties": (_master("broker-a"), []),
    "2m-2s-async/broker-a-s.properties": (_slave("broker-a"), []),
    "2m-2s-async/broker-b.properties": (_master("broker-b"), []),
    "2m-2s-async/broker-b-s.properties": (_slave("broker-b"), []),
    "dledger/broker-n0.conf": (
        "\nbrokerClusterName = RaftCluster\nbrokerName=RaftNode00\nlistenPort=30911\n"
        "namesrvAddr=127.0.0.1:9876\nstorePathRootDir={tmp}/rmqstore/node00\n"
        "storePathCommitLog={tmp}/rmqstore/node00/commitlog\nenableDLegerCommitLog=true\n"
        "dLegerGroup=RaftNode00\n"
        "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913\n"
        "dLegerSelfId=n0\nsendMessageThreadPoolNums=16\n",
        ["enableDLegerCommitLog", "dLegerGroup", "dLegerPeers", "dLegerSelfId",
         "sendMessageThreadPoolNums"],
    ),
    # 2m-2s-sync/broker-a.properties with the tuning RocketMQ 4.9's operation guide
    # (docs/en/operation.md, "Performance tuning") recommends
    "tuned/broker-a.properties": (
        _master("broker-a", "SYNC_MASTER") + "storePathRootDir={tmp}/store\n"
        "storePathCommitLog={tmp}/store/commitlog\nuseReentrantLockWhenPutMessage=true\n"
        "transientStorePoolEnable=true\ntransferMsgByHeap=false\n"
        "sendMessageThreadPoolNums=32\n",
        ["useReentrantLockWhenPutMessage", "transientStorePoolEnable", "transferMsgByHeap",
         "sendMessageThreadPoolNums"],
    ),
}  # fmt: skip


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace("{tmp}", str(tmp_path)), encoding="utf-8")
    return str(path)


def warned_keys(caplog, path: str) -> list[str]:
    """The keys of the one-line warnings about ``path``, in order."""
    keys = []
    for record in caplog.records:
        text = record.getMessage()
        assert record.levelno == logging.WARNING and "\n" not in text
        assert text.startswith(f"{path}: ") and " ignored: " in text
        keys.append(text[len(path) + 2 :].split(" ", 1)[0])
    return keys


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_rocketmq_samples_load_with_warnings_only_for_meaningless_keys(tmp_path, caplog, name):
    text, expected = SAMPLES[name]
    path = write(tmp_path, name, text)
    with caplog.at_level(logging.WARNING, logger="shmq"):
        cfg = load_broker_config(path)
    assert warned_keys(caplog, path) == expected
    for record in caplog.records:
        key = record.getMessage()[len(path) + 2 :].split(" ", 1)[0]
        assert record.getMessage().endswith(f" ignored: {ignored_reason(key)}")
    assert cfg.broker_name in ("broker-a", "broker-b", "RaftNode00")
    assert cfg.store.delete_when == "04"
    if name.startswith("dledger"):
        assert (cfg.broker_cluster_name, cfg.listen_port) == ("RaftCluster", 30911)
        assert cfg.namesrv_addrs == ["127.0.0.1:9876"]
        assert cfg.store.store_path_root_dir == f"{tmp_path}/rmqstore/node00"
    else:
        assert cfg.store.file_reserved_time == 48 and cfg.store.flush_disk_type == "ASYNC_FLUSH"
    if name.endswith("-s.properties"):
        assert (cfg.broker_role, cfg.broker_id) == ("SLAVE", 1)


def test_a_typo_is_refused_with_the_nearest_key(tmp_path):
    path = write(tmp_path, "broker.conf", SAMPLES["broker.conf"][0] + "brokerNmae = broker-b\n")
    with pytest.raises(ConfigError, match=r"unknown broker config key 'brokerNmae' \(did you "
                       r"mean 'brokerName'\?\)") as info:  # fmt: skip
        load_broker_config(path)
    assert path in str(info.value)
    near_ignored = write(tmp_path, "b.conf", "sendMessageThreadPoolNum=8\n")
    with pytest.raises(ConfigError, match="did you mean 'sendMessageThreadPoolNums'"):
        load_broker_config(near_ignored)
    with pytest.raises(ConfigError, match=r"unknown broker config key 'x'$"):
        load_broker_config(write(tmp_path, "c.conf", "x=1\n"))


def test_snake_case_and_toml_spellings_of_ignored_keys(tmp_path, caplog):
    text = (
        'send_message_thread_pool_nums = 8\nbrokerName = "t"\n[store]\n'
        "transientStorePoolEnable = true\nflushDiskType = 'SYNC_FLUSH'\n"
    )
    toml = write(tmp_path, "b.toml", text)
    with caplog.at_level(logging.WARNING, logger="shmq"):
        cfg = load_broker_config(toml)
    assert warned_keys(caplog, toml) == [
        "send_message_thread_pool_nums",
        "transientStorePoolEnable",
    ]
    assert cfg.broker_name == "t" and cfg.store.sync_flush
    with pytest.raises(ConfigError, match=r"\[store\] has unknown store key 'flushDiskTipe' "
                       r"\(did you mean 'flushDiskType'\?\)"):  # fmt: skip
        load_broker_config(write(tmp_path, "c.toml", "[store]\nflushDiskTipe = 'x'\n"))


def test_store_path_commit_log_is_honoured_only_under_the_root(tmp_path):
    root = str(tmp_path / "store")
    cfg = BrokerConfig().replace(storePathRootDir=root, storePathCommitLog=f"{root}/commitlog/")
    assert cfg.store.store_path_commit_log == ""  # the default: it follows the root
    moved = cfg.replace(store_path_root_dir=str(tmp_path / "other"))  # `shmq start --store`
    assert moved.store.store_path_root_dir == str(tmp_path / "other")
    with pytest.raises(ConfigError, match=r"storePathCommitLog '/data/commitlog' is not "
                       rf"'{root}/commitlog': .* set storePathRootDir=/data instead"):  # fmt: skip
        cfg.replace(storePathCommitLog="/data/commitlog")
    with pytest.raises(ConfigError, match=r"remove it$"):
        cfg.replace(storePathCommitLog="/ssd/cl")


def test_acl_enable_finds_plain_acl_yml_beside_the_conf_or_at_acl_file(tmp_path):
    from shmq.broker.acl.plain_file import acl_file_path

    assert not load_broker_config(write(tmp_path, "a.conf", "aclEnable=false\n")).acl_enable
    cfg = load_broker_config(write(tmp_path, "b.conf", "aclEnable=true\n"))
    assert cfg.acl_enable and acl_file_path(cfg) == str(tmp_path / "plain_acl.yml")
    cfg = load_broker_config(write(tmp_path, "c.conf", "aclEnable=true\naclFile=acl/x.yml\n"))
    assert acl_file_path(cfg) == str(tmp_path / "acl" / "x.yml")
    with pytest.raises(ConfigError, match="set aclFile"):
        acl_file_path(BrokerConfig(acl_enable=True))


def test_every_rocketmq_4_9_key_is_read_or_ignored():
    read = {camel_case(f.name) for cls in (BrokerConfig, MessageStoreConfig)
            for f in dataclasses.fields(cls) if f.name not in NOT_KEYS}  # fmt: skip
    ignored = ignored_keys()
    assert len(ignored) == len(set(ignored)), "a key is in two groups"
    assert set(ignored) <= ROCKETMQ_4_9_KEYS, "only RocketMQ's keys are ignored"
    assert not read & set(ignored), "a key shmq reads is also ignored"
    assert ROCKETMQ_4_9_KEYS - read - set(ignored) == set()
    assert len({snake_case(k) for k in read | set(ignored)}) == len(read | set(ignored))
    assert all(why and not why.endswith(".") for why, _keys in IGNORED_GROUPS)


def test_the_cli_prints_the_warnings_and_the_error_on_stderr(tmp_path):
    conf = write(tmp_path, "broker.conf",
                 "brokerName=b\nuseReentrantLockWhenPutMessage=true\nbrokerNmae=x\n")  # fmt: skip
    for args in (["broker", "-c", conf],
                 ["start", "--daemon", "--store", str(tmp_path / "s"), "-c", conf]):  # fmt: skip
        done = shmq(*args, timeout=60)
        assert done.returncode == 1, done
        lines = done.stderr.splitlines()
        assert len(lines) == 2, done.stderr
        assert lines[0].endswith(
            f"WARNING shmq.broker.config.broker_config: {conf}: useReentrantLockWhenPutMessage "
            f"ignored: {ignored_reason('useReentrantLockWhenPutMessage')}"
        )
        assert lines[1] == (f"error: {conf}: unknown broker config key 'brokerNmae' "
                            "(did you mean 'brokerName'?)")  # fmt: skip
    assert not (tmp_path / "s" / "shmq.log").exists()  # refused before a daemon started
