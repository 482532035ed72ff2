"""RocketMQ 4.9 broker.conf keys that shmq accepts but does not read, each with the reason.

RocketMQ's ``BrokerStartup`` applies a broker.conf to four classes at once (``BrokerConfig``,
``NettyServerConfig``, ``NettyClientConfig``, ``MessageStoreConfig``) and ignores any other
name. shmq reads the keys whose meaning carries over (the fields of ``BrokerConfig`` and
``MessageStoreConfig``) and refuses a name it does not know, so that a typo is not taken for
a setting. The keys here are RocketMQ's own but mean nothing for a broker of processes on one
host: RocketMQ's sample configs and a user's tuned broker.conf hold them, so they load, with
one warning line per key saying why it is ignored. Keys sharing a reason are grouped, so the
table stays short and the configuration reference (README.md) lists them by reason.
"""

from __future__ import annotations

from shmq.config import snake_case

IGNORED_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "RocketMQ's Java thread pools and their queues: shmq's writer, reput and flush are "
        "processes fed by shared-memory rings, and its control server runs every request on "
        "its `serverWorkerThreads`",
        (
            "sendMessageThreadPoolNums", "putMessageFutureThreadPoolNums",
            "pullMessageThreadPoolNums", "queryMessageThreadPoolNums",
            "adminBrokerThreadPoolNums", "clientManageThreadPoolNums",
            "consumerManageThreadPoolNums", "heartbeatThreadPoolNums",
            "endTransactionThreadPoolNums", "sendThreadPoolQueueCapacity",
            "putThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity",
            "queryThreadPoolQueueCapacity", "clientManagerThreadPoolQueueCapacity",
            "consumerManagerThreadPoolQueueCapacity", "heartbeatThreadPoolQueueCapacity",
            "endTransactionPoolQueueCapacity",
            "serverCallbackExecutorThreads", "serverSelectorThreads", "clientWorkerThreads",
            "clientCallbackExecutorThreads",
        ),
    ),
    (
        "RocketMQ's fast failure drops requests that waited too long in a thread pool's "
        "queue or for the put lock; shmq has neither: a send waits for room in a ring",
        (
            "brokerFastFailureEnable", "waitTimeMillsInSendQueue", "waitTimeMillsInPullQueue",
            "waitTimeMillsInHeartbeatQueue", "waitTimeMillsInTransactionQueue",
            "osPageCacheBusyTimeOutMills",
        ),
    ),
    (
        "a Netty or JVM I/O setting (socket buffers, byte-buffer allocators, selectors, "
        "request semaphores, client timeouts): shmq's remoting is Python sockets with the "
        "kernel's buffer sizes",
        (
            "serverSocketSndBufSize", "serverSocketRcvBufSize", "serverSocketBacklog",
            "serverPooledByteBufAllocatorEnable", "serverAsyncSemaphoreValue",
            "serverOnewaySemaphoreValue", "clientSocketSndBufSize", "clientSocketRcvBufSize",
            "clientPooledByteBufAllocatorEnable", "clientAsyncSemaphoreValue",
            "clientOnewaySemaphoreValue", "clientChannelMaxIdleTimeSeconds",
            "clientCloseSocketIfTimeout", "connectTimeoutMillis", "channelNotActiveInterval",
            "writeBufferHighWaterMark", "writeBufferLowWaterMark", "useEpollNativeSelector",
            "transferMsgByHeap",
        ),
    ),
    (
        "no off-heap write buffer pool, so no commit step: the writer puts messages "
        "straight into the mapped CommitLog file and the flush agent syncs it",
        (
            "transientStorePoolEnable", "transientStorePoolSize",
            "fastFailIfNoBufferInStorePool", "commitIntervalCommitLog",
            "commitCommitLogLeastPages", "commitCommitLogThoroughInterval",
        ),
    ),
    (
        "one writer process appends to the CommitLog: there is no put lock to choose or watch",
        ("useReentrantLockWhenPutMessage", "debugLockEnable"),
    ),
    (
        "shmq has no DLedger (Raft) CommitLog: the broker runs as brokerRole says (a master "
        "unless set); for failover use enableControllerMode",
        (
            "enableDLegerCommitLog", "dLegerGroup", "dLegerPeers", "dLegerSelfId",
            "preferredLeaderId", "storePathDLedgerCommitLog", "enableBatchPush",
        ),
    ),
    (
        "shmq has no name-server address service: the namesrvs are namesrvAddr's",
        ("fetchNamesrvAddrByAddressServer", "rmqAddressServerDomain", "rmqAddressServerSubGroup"),
    ),
    (
        "the broker registers its whole topic config with each namesrv every "
        "registerNameServerPeriod, uncompressed and with a fixed timeout",
        ("forceRegister", "registerBrokerTimeoutMills", "compressedRegister"),
    ),
    (
        "shmq filters by tag and SQL92 (`enablePropertyFilter`) only: no class filters, "
        "filter servers, bloom-filter bit maps, consume-queue extension or SQL on retry topics",
        (
            "enableCalcFilterBitMap", "expectConsumerNumUseFilter",
            "maxErrorRateOfBloomFilter", "filterDataCleanTimeSpan", "filterServerNums",
            "filterSupportRetry", "enableConsumeQueueExt", "mappedFileSizeConsumeQueueExt",
            "bitMapLengthConsumeQueueExt",
        ),
    ),
    (
        "no light message queues: a message is dispatched to its own topic's queue only",
        ("enableLmq", "enableMultiDispatch", "maxLmqConsumeQueueNum"),
    ),
    (
        "the schedule agent sends due messages to the writer through a ring of its own and "
        "writes its progress once the flush has passed it",
        (
            "enableScheduleAsyncDeliver", "scheduleAsyncDeliverMaxPendingLimit",
            "scheduleAsyncDeliverMaxResendNum2Blocked", "enableScheduleMessageStats",
            "flushDelayOffsetInterval",
        ),
    ),
    (
        "RocketMQ's commercial accounting, stats switches and log layout: shmq's stats are "
        "always on (`shmq status`, brokerRuntimeInfo) and it logs through Python's logging",
        (
            "commercialEnable", "commercialTimerCount", "commercialTransCount",
            "commercialBigCount", "commercialBaseCount", "enableDetailStat",
            "autoDeleteUnusedStats", "diskFallRecorded", "isolateLogEnable",
        ),
    ),
    (
        "answers carry RocketMQ's defaults, MSG_REGION DefaultRegion and TRACE_ON true",
        ("regionId", "traceOn"),
    ),
    (
        "the cleaner deletes a round's files without pauses, and a deleted file is unmapped by "
        "its owner at once and by a reader at its next read, so none hangs to be retried",
        (
            "deleteCommitLogFilesInterval", "deleteConsumeQueueFilesInterval",
            "redeleteHangedFileInterval", "destroyMapedFileIntervalForcibly",
        ),
    ),
    (
        "read by nothing in RocketMQ 4.9 either",
        ("maxDelayTime", "putMsgIndexHightWater", "flushConsumerOffsetHistoryInterval",
         "highSpeedMode"),
    ),
    (
        "fixed at RocketMQ's default: a group's members are told at once when it changes",
        ("notifyConsumerIdsChangedEnable",),
    ),
    (
        "a SYNC_MASTER waits for its slave up to syncFlushTimeout, as RocketMQ 4.9.0-4.9.3 "
        "did",
        ("slaveTimeout",),
    ),
    (
        "the ASYNC_FLUSH agent looks every flushIntervalCommitLog (as RocketMQ's timed "
        "flush); SYNC_FLUSH's is woken by the writer",
        ("flushCommitLogTimed",),
    ),
    (
        "reput dispatches every record written: there is no confirm offset to stop at",
        ("duplicationEnable",),
    ),
    (
        "warming touches a new file's pages without flushing them on the way",
        ("flushLeastPagesWhenWarmMapedFile",),
    ),
    (
        "reput flushes consume queues by flushConsumeQueueLeastPages only, and all of them "
        "at a stop",
        ("flushConsumeQueueThoroughInterval",),
    ),
    (
        "recovery always goes back to the index's checkpoint time too, when "
        "messageIndexEnable is on (as RocketMQ's messageIndexSafe)",
        ("messageIndexSafe",),
    ),
    (
        "a query by unique key answers up to the request's maxNum (and maxMsgsNumBatch)",
        ("defaultQueryMaxNum",),
    ),
    (
        "shmq never disables a slow consumer group (RocketMQ's default): with slaveReadEnable "
        "one far behind is sent to a slave",
        ("consumerFallbehindThreshold", "disableConsumeIfConsumerReadSlowly"),
    ),
    (
        "a slave that serves pulls (slaveReadEnable) answers an offset out of range as a "
        "master does",
        ("offsetCheckInSlave",),
    ),
    ("sends are accepted as soon as the broker has started", ("startAcceptSendRequestTimeStamp",)),
    (
        "shmq has no switch to refuse transactional messages: it takes them",
        ("rejectTransactionMessage",),
    ),
    (
        "the master listens for slaves on brokerIP1 (haListenPort) and registers that address",
        ("brokerIP2",),
    ),
    (
        "the CommitLog is one directory, storePathRootDir/commitlog: no read-only extra ones",
        ("readOnlyCommitLogStorePaths",),
    ),
    ("shmq is a Python package, not an installation with a home", ("rocketmqHome",)),
    ("the store is shmq's own, with no plug-ins", ("messageStorePlugIn",)),
    (
        "the keys updateBrokerConfig refuses are fixed (RocketMQ's default list and the "
        "store's layout)",
        ("configBlackList",),
    ),
)  # fmt: skip

# snake_case spelling (how the loader compares keys) -> (RocketMQ's spelling, reason)
_IGNORED = {snake_case(k): (k, why) for why, keys in IGNORED_GROUPS for k in keys}


def ignored_reason(key: str) -> str | None:
    """Why the RocketMQ key ``key`` (camelCase or snake_case) is ignored, or None when it is
    not one of the keys listed here."""
    entry = _IGNORED.get(snake_case(key))
    return entry[1] if entry else None


def ignored_keys() -> list[str]:
    """Every ignored key, spelt as RocketMQ spells it."""
    return [k for _why, keys in IGNORED_GROUPS for k in keys]
