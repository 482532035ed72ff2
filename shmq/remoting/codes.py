"""RocketMQ's request and response codes (``RequestCode``, ``ResponseCode``), plus shmq's
own shared-memory codes in 9001+. ``remoting.protocol`` re-exports them."""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    """Request codes: RocketMQ's numbers, plus shmq's shared-memory data path in 9001+."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    GET_ALL_CONSUMER_OFFSET = 43
    GET_ALL_DELAY_OFFSET = 45
    CHECK_CLIENT_CONFIG = 46
    # ACL 1.0's (RocketMQ 4.9 to 5.3.2)
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    GET_BROKER_CLUSTER_ACL_CONFIG = 54  # deprecated in RocketMQ
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_BROKER_HA_STATUS = 907  # RocketMQ 5's code; the body is shmq's JSON
    CONTROLLER_ELECT_MASTER = 1002
    CONTROLLER_REGISTER_BROKER = 1003  # RocketMQ 5's code; shmq's fields (namesrv.controller)
    CONTROLLER_GET_METADATA_INFO = 1005
    CONTROLLER_GET_SYNC_STATE_DATA = 1006  # RocketMQ 5's code; the body is shmq's JSON
    GET_BROKER_EPOCH_CACHE = 1007
    CLEAN_BROKER_DATA = 1011
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_KVLIST_BY_NAMESPACE = 219
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_STATUS_FROM_CLIENT = 221
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    GET_TOPICS_BY_CLUSTER = 224
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    QUERY_CONSUME_TIME_SPAN = 303
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    GET_CONSUMER_RUNNING_INFO = 307
    QUERY_CORRECTION_OFFSET = 308
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    CLONE_GROUP_OFFSET = 314
    VIEW_BROKER_STATS_DATA = 315
    CLEAN_UNUSED_TOPIC = 316
    GET_BROKER_CONSUME_STATS = 317
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    SEND_BATCH_MESSAGE = 320
    QUERY_CONSUME_QUEUE = 321
    QUERY_DATA_VERSION = 322
    RESUME_CHECK_HALF_MESSAGE = 323
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    PUSH_REPLY_MESSAGE_TO_CLIENT = 326
    ADD_WRITE_PERM_OF_BROKER = 327
    DELETE_EXPIRED_COMMITLOG = 329  # RocketMQ 5's
    GET_TOPIC_CONFIG = 351  # RocketMQ 5's
    GET_SUBSCRIPTIONGROUP_CONFIG = 352  # RocketMQ 5's
    RECALL_MESSAGE = 370  # RocketMQ 5.3's
    UPDATE_AND_CREATE_STATIC_TOPIC = 513  # RocketMQ 5's (shmq answers it not supported)
    # RocketMQ 5's POP consumption
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    PEEK_MESSAGE = 200052
    CHANGE_MESSAGE_INVISIBLETIME = 200053
    NOTIFICATION = 200054
    POLLING_INFO = 200055
    BATCH_ACK_MESSAGE = 200151
    # shmq's own: POP groups' in-flight, revive backlog and retries (JSON body)
    GET_POP_STATUS = 9102
    # shmq's own: messages of a topic stored in [beginTimestamp, endTimestamp]
    QUERY_MESSAGE_BY_TIME = 9100
    # shmq's own: the half messages a broker holds open, per producer group
    GET_TRANSACTION_STATUS = 9101
    REGISTER_PRODUCER = 9001
    UNREGISTER_PRODUCER = 9002
    REGISTER_CONSUMER = 9003
    UNREGISTER_CONSUMER = 9004
    WATCH_QUEUES = 9005
    GET_STORE_INFO = 9006
    # shmq's own, internal: from a broker's data server to its control server
    RELAY_HELLO = 9010  # a relay link's first frame: the client it relays for (peer, TLS)
    RELAY_PULLED = 9011  # what a pull the data server answered tells the broker (oneway)
    RELAY_METRICS = 9012  # the data server's request latency and queued requests (oneway)


# the data server's own requests to the control server: never relayed for a client
RELAY_CODES = frozenset(
    {RequestCode.RELAY_HELLO, RequestCode.RELAY_PULLED, RequestCode.RELAY_METRICS}
)


class ResponseCode(IntEnum):
    """RocketMQ's response codes (``ResponseCode`` / ``RemotingSysResponseCode``).

    RocketMQ numbers the ACL admin codes' failures 209 to 211, which it also uses for
    POLLING_FULL, POLLING_TIMEOUT and BROKER_NOT_EXIST; here they are aliases of those
    (an answer's name is the first one), the numbers on the wire are RocketMQ's."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207
    NO_MESSAGE = 208
    POLLING_FULL = 209
    POLLING_TIMEOUT = 210
    BROKER_NOT_EXIST = 211
    UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
    DELETE_ACL_CONFIG_FAILED = 210
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
    ILLEGAL_OPERATION = 604
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_ELECT_MASTER_FAILED = 2012


def request_name(code: int) -> str:
    """``SEND_MESSAGE(10)`` for a known request code, ``request code 999`` otherwise."""
    try:
        return f"{RequestCode(code).name}({code})"
    except ValueError:
        return f"request code {code}"


def response_name(code: int) -> str:
    """``TOPIC_NOT_EXIST`` for a known response code, ``response code 999`` otherwise."""
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"response code {code}"
