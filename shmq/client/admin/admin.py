"""Cluster administration (RocketMQ's ``DefaultMQAdminExt``): what ``shmq admin`` runs.

Topics, routes, queue and consume statistics, consumer connections, message queries,
offset resets, subscription groups, dead-letter queues, pending transactions and broker
status, over the control plane: the namesrv for routes and cluster membership, each broker
for its own part. Results are plain lists and dicts (messages in ``message_to_json``'s
shape, the body base64-encoded) or the small frozen dataclasses of ``admin.types``, each
with ``to_json()`` giving RocketMQ's field names.

``Admin`` is the one entry point, flat as RocketMQ's ``DefaultMQAdminExt`` is: each call
delegates to the part that does it (``topics``, ``brokers``, ``offsets``, ``connections``,
``sub_groups``, ``messages``, ``browse``, ``dlq``, ``transactions``, ``queues``, ``stats``,
``send_rt``, ``pop``, ``namesrv``, ``acl``, ``controller``), objects ``Admin`` creates and
owns that share one ``Remote`` (where requests go and how they are sent). The calls are
documented here.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any

from shmq.client.admin.acl import AclConfigs
from shmq.client.admin.brokers import Brokers
from shmq.client.admin.connections import GroupConnections
from shmq.client.admin.controller import ControllerAdmin
from shmq.client.admin.message.browse import QueueBrowser
from shmq.client.admin.message.dlq import DeadLetterQueues
from shmq.client.admin.message.queries import DEFAULT_QUERY_NUM, MessageQueries
from shmq.client.admin.message.send_rt import SendLatency
from shmq.client.admin.message.transactions import Transactions
from shmq.client.admin.namesrv import NamesrvAdmin
from shmq.client.admin.offsets import GroupOffsets
from shmq.client.admin.pop import PopGroups
from shmq.client.admin.queues import QueueQueries
from shmq.client.admin.remote import Remote
from shmq.client.admin.stats import BrokerStats
from shmq.client.admin.sub_groups import SubscriptionGroups
from shmq.client.admin.topics import Topics
from shmq.client.admin.types import ConsumerProgress, QueueStatus
from shmq.client.trace.encoder import TRACE_TOPIC
from shmq.client.types import MessageQueue
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions


class Admin:
    """Administers the brokers registered with the namesrv(s) ``namesrv`` (``;``-separated).

    Calls that touch several brokers go to the master of every broker name involved: the
    brokers of the topic's route, or those of ``cluster`` (when the namesrv knows a single
    cluster, that one by default), or just ``broker`` (a name or a ``host:port`` address).
    ``credentials`` (``(access_key, secret_key)``) signs every request, for servers with
    ACL on; ``tls`` (True, or a ``TlsOptions``) connects with TLS. Failures raise shmq's
    exceptions (``NoRouteError``, ``ResponseError`` with the broker's code,
    ``ClientError``, ``RemotingError``), their messages naming the topic, group or broker.

    Example::

        with Admin("127.0.0.1:9876") as admin:
            admin.update_topic("Orders", read_queue_nums=4, write_queue_nums=4)
            for q in admin.topic_status("Orders"):
                print(q.broker_name, q.queue_id, q.min_offset, q.max_offset)
            progress = admin.consumer_progress("OrderReaders", "Orders")
            print("lag", progress.diff_total)
            admin.reset_offset("OrderReaders", "Orders", int(time.time() * 1000) - 3600_000)
    """

    def __init__(
        self,
        namesrv: str = "127.0.0.1:9876",
        *,
        timeout: float = 5.0,
        credentials: Credentials | tuple[str, str] | None = None,
        tls: bool | TlsOptions | None = None,
    ) -> None:
        self._remote = remote = Remote(namesrv, timeout, credentials=credentials, tls=tls)
        self._topics = Topics(remote)
        self._brokers = Brokers(remote)
        self._offsets = GroupOffsets(remote, self._topics)
        self._connections = GroupConnections(remote)
        self._sub_groups = SubscriptionGroups(remote, self._topics)
        self._messages = MessageQueries(remote)
        self._dlq = DeadLetterQueues(remote, self._messages)
        self._transactions = Transactions(remote, self._messages)
        self._queues = QueueQueries(remote)
        self._stats = BrokerStats(remote, self._topics, self._offsets)
        self._pop = PopGroups(remote)
        self._namesrv = NamesrvAdmin(remote)
        self._acl = AclConfigs(remote)
        self._browse = QueueBrowser(remote)
        self._send_rt = SendLatency(remote)
        self._controller = ControllerAdmin(remote)

    def close(self) -> None:
        self._remote.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- brokers ----------------------------------------------------------------------------------

    def cluster_info(self) -> dict[str, Any]:
        """The namesrv's ``ClusterInfo``: ``{"brokerAddrTable": {name: {"cluster",
        "brokerName", "brokerAddrs": {id: addr}}}, "clusterAddrTable": {cluster: [names]}}``."""
        return self._remote.cluster_info()

    def cluster_list(self) -> list[dict[str, Any]]:
        """Every registered broker address: ``cluster``, ``brokerName``, ``brokerId``,
        ``address`` and ``status`` (its runtime info), or ``error`` when it does not
        answer."""
        return self._brokers.cluster_list()

    def ha_status(self) -> list[dict[str, Any]]:
        """Every registered broker's replication state (``GET_BROKER_HA_STATUS``): a
        master's slaves with their acked offset and lag, a slave's master; ``error`` for a
        broker that does not answer."""
        return self._brokers.ha_status()

    def broker_status(self, broker: str) -> dict[str, Any]:
        """A broker's runtime info (``shmq status``'s numbers), by name or address."""
        return self._brokers.broker_status(broker)

    def broker_config(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, str]]:
        """Each master's config by broker name: every broker and store key, RocketMQ's
        names (mqadmin ``getBrokerConfig``); ``broker``: one, by name or address."""
        return self._brokers.broker_config(broker, cluster)

    def update_broker_config(
        self, key: str, value: str, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, str | None]:
        """Set ``key`` to ``value`` on each master (mqadmin ``updateBrokerConfig -k -v``):
        a key the control plane reads acts at once, any other is written to the broker's
        config file for its next start; by broker name, the broker's remark saying which
        (None: it acted at once). Raises ``ResponseError`` naming the broker and the
        problem (an unknown or black-listed key, a bad value)."""
        return self._brokers.update_broker_config(key, value, broker, cluster)

    # -- topics -----------------------------------------------------------------------------------

    def update_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        """Create or change ``topic`` on ``broker``, or on every broker of ``cluster``;
        the names of the brokers changed. Each broker registers the change with the
        namesrv before it answers."""
        return self._topics.update_topic(
            topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            broker=broker,
            cluster=cluster,
        )

    def update_topic_perm(
        self, topic: str, perm: int, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """Change ``topic``'s permission (4 read, 2 write, 6 both) on ``broker``, or on the
        brokers of ``cluster`` serving it (mqadmin ``updateTopicPerm``), keeping each
        broker's queue counts as its route shows them. One row per broker: ``brokerName``,
        ``brokerAddr``, ``oldPerm``, ``perm``, ``readQueueNums``, ``writeQueueNums`` and
        ``changed`` (False where the perm was already ``perm``: nothing sent, as mqadmin's
        "new perm equals to the old one!"). ``ClientError`` when none of them has the
        topic."""
        return self._topics.update_topic_perm(topic, perm, broker, cluster)

    def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the brokers of ``cluster`` (default: those serving it),
        with its stored messages and its groups' offsets there, and from every namesrv;
        the names of the brokers that had it. Created again, the topic starts empty, its
        queue offsets past every old one (see the README)."""
        return self._topics.delete_topic(topic, cluster)

    def topic_list(self) -> list[str]:
        """Every topic the namesrv routes (system topics included), sorted."""
        return self._topics.topic_list()

    def topic_route(self, topic: str) -> dict[str, Any]:
        """The namesrv's ``TopicRouteData``: ``queueDatas`` (per broker: queue counts,
        perm) and ``brokerDatas`` (per broker: cluster and addresses by id)."""
        return self._remote.topic_route(topic)

    def topic_status(self, topic: str) -> list[QueueStatus]:
        """Min and max offset and last store time of every queue of ``topic``, sorted by
        broker and queue."""
        return self._topics.topic_status(topic)

    def topic_cluster_list(self, topic: str) -> list[str]:
        """The clusters whose brokers serve ``topic``, sorted (mqadmin
        ``topicClusterList``)."""
        return self._topics.topic_cluster_list(topic)

    def allocate_mq(self, topic: str, client_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
        """How a clustering group of consumers ``client_ids`` shares ``topic``'s readable
        queues by RocketMQ's default strategy (``AllocateMessageQueueAveragely``, mqadmin
        ``allocateMQ``): client id → its queues (``topic``, ``brokerName``,
        ``queueId``)."""
        return self._topics.allocate_mq(topic, client_ids)

    def topic_consume_by_who(self, topic: str) -> list[str]:
        """The groups that have offsets on ``topic`` or online members subscribing it."""
        return self._topics.topic_consume_by_who(topic)

    # -- groups' offsets --------------------------------------------------------------------------

    def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        """Per queue: broker offset, committed offset and lag, over every broker (of
        ``topic``'s route when given). ``ClientError`` when the group has no offsets."""
        return self._offsets.consumer_progress(group, topic)

    def reset_offset(
        self, group: str, topic: str, timestamp_ms: int, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: the end of each queue); without ``force`` only queues whose
        committed offset is beyond that move. The brokers commit the offsets and tell the
        group's online consumers. Returns the resulting offset of every queue (of the
        brokers where the group has offsets or members; ``ResponseError``
        CONSUMER_NOT_ONLINE when it has them nowhere)."""
        return self._offsets.reset_offset(group, topic, timestamp_ms, force)

    def skip_accumulated_message(
        self, group: str, topic: str, force: bool = True, cluster: str | None = None
    ) -> dict[MessageQueue, int]:
        """Skip ``group``'s backlog on ``topic``: its offsets moved to the end of every
        queue (mqadmin ``skipAccumulatedMessage``, a reset to timestamp -1), on the brokers
        of ``cluster`` only when given. As ``reset_offset``."""
        return self._offsets.reset_offset(group, topic, -1, force, cluster)

    def consumer_offsets(
        self, group: str, topic: str, client_id: str | None = None
    ) -> dict[str, dict[MessageQueue, int]]:
        """What each online member of ``group`` (only ``client_id`` when given) holds as
        its offsets on ``topic``, by client id (mqadmin ``getConsumerStatus``): asked
        through every broker of the topic's route, merged. ``ResponseError`` SYSTEM_ERROR
        when no member is online."""
        return self._offsets.consumer_offsets(group, topic, client_id)

    def clone_group_offset(
        self, src_group: str, dest_group: str, topic: str, offline: bool = False
    ) -> list[str]:
        """Give ``dest_group`` a copy of ``src_group``'s committed offsets on ``topic`` on
        every broker of its route (mqadmin ``cloneGroupOffset``); unless ``offline``, a
        broker where ``src_group`` is online but does not subscribe to ``topic`` keeps
        ``dest_group``'s. Returns the broker names asked."""
        return self._offsets.clone_group_offset(src_group, dest_group, topic, offline)

    def broker_consume_stats(
        self, broker: str | None = None, cluster: str | None = None, order_only: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Every subscription group's progress on each master (mqadmin
        ``brokerConsumeStats``): by broker name, ``{"brokerAddr", "totalDiff", "groups":
        {group: [QueueProgress]}}`` (a group with no offsets there has none); with
        ``order_only``, ordered topics only."""
        return self._offsets.broker_consume_stats(broker, cluster, order_only)

    # -- online members ---------------------------------------------------------------------------

    def consumer_connection(self, group: str) -> dict[str, Any]:
        """The group's online members over every broker (RocketMQ's
        ``ConsumerConnection``: ``connectionSet``, ``subscriptionTable``, ``consumeType``,
        ``messageModel``, ``consumeFromWhere``). ``ResponseError`` CONSUMER_NOT_ONLINE when
        none is online."""
        return self._connections.consumer_connection(group)

    def producer_connection(self, group: str) -> dict[str, Any]:
        """The group's producers over every master (RocketMQ's ``ProducerConnection``:
        ``connectionSet``, one per client id); ``ResponseError`` when no broker has one."""
        return self._connections.producer_connection(group)

    def consumer_status(
        self, group: str, client_id: str | None = None, jstack: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Each online member's ``ConsumerRunningInfo`` (``mqadmin consumerStatus``), asked
        through a broker it heartbeats to, by client id (only ``client_id``'s, if given):
        ``properties``, ``subscriptionSet``, ``mqTable`` (one dict per held queue, with
        ``topic``, ``brokerName``, ``queueId`` and RocketMQ's ``ProcessQueueInfo``
        fields), ``statusTable``, ``userConsumerInfo`` and, with ``jstack``, a thread dump.
        ``ResponseError`` CONSUMER_NOT_ONLINE when the group (or that member) is not
        online; CONSUME_MSG_TIMEOUT when a member does not answer in time."""
        return self._connections.consumer_status(group, client_id, jstack)

    # -- subscription groups ----------------------------------------------------------------------

    def update_sub_group(
        self, group: str, *, broker: str | None = None, cluster: str | None = None, **settings: Any
    ) -> dict[str, dict[str, Any]]:
        """Create ``group``'s subscription group, or change the given ``settings``
        (``consume_enable``, ``consume_from_min_enable``, ``consume_broadcast_enable``,
        ``retry_queue_nums``, ``retry_max_times``, ``broker_id``,
        ``which_broker_when_consume_slowly``, ``notify_consumer_ids_changed_enable``) on
        ``broker`` or every broker of ``cluster``. Returns broker name → the config."""
        return self._sub_groups.update_sub_group(group, broker=broker, cluster=cluster, **settings)

    def examine_sub_group(
        self, group: str, *, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Broker name → ``group``'s subscription group config, where it exists."""
        return self._sub_groups.examine_sub_group(group, broker=broker, cluster=cluster)

    def delete_sub_group(
        self,
        group: str,
        *,
        broker: str | None = None,
        cluster: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        """Delete ``group``'s subscription group (and with ``remove_offset`` its committed
        offsets) on ``broker`` or every broker of ``cluster``; the brokers that had it.
        Without ``broker``, the group's retry and dead-letter topics are deleted as well,
        with their messages, as mqadmin's ``deleteSubGroup -c`` does."""
        return self._sub_groups.delete_sub_group(
            group, broker=broker, cluster=cluster, remove_offset=remove_offset
        )

    # -- messages ---------------------------------------------------------------------------------

    def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> dict[str, Any]:
        """The message with offset message id ``msg_id`` (store host + CommitLog offset),
        read from the broker at that store host. When ``msg_id`` is a unique key (the
        client's msg id) instead, give ``topic``: it is then looked up as one, as mqadmin
        does."""
        return self._messages.query_msg_by_id(msg_id, topic)

    def consume_message_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Have member ``client_id`` of ``group`` consume the message ``msg_id`` (as
        ``query_msg_by_id`` finds it) with its listener now (``mqadmin queryMsgById -g -d``,
        RocketMQ's ``consumeMessageDirectly``): its ``ConsumeMessageDirectlyResult``
        (``order``, ``autoCommit``, ``consumeResult``, ``remark``, ``spentTimeMills``).
        Offsets do not move. ``ResponseError``: SYSTEM_ERROR when the member is not online
        at the message's broker or not a push consumer of the group, CONSUME_MSG_TIMEOUT
        when its listener takes longer than the broker waits."""
        return self._messages.consume_message_directly(group, client_id, msg_id, topic)

    def query_msg_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = DEFAULT_QUERY_NUM,
        begin: int = 0,
        end: int | None = None,
    ) -> list[dict[str, Any]]:
        """The newest ``max_num`` messages of ``topic`` with ``key`` among their keys,
        stored in ``[begin, end]`` ms (end: now), oldest first; [] when none."""
        return self._messages.query_msg_by_key(topic, key, max_num, begin, end)

    def query_msg_by_unique_key(self, topic: str, msg_id: str) -> dict[str, Any]:
        """The message of ``topic`` whose unique key (``UNIQ_KEY``, the msg id a producer's
        ``send`` returns) is ``msg_id``; the first stored when it was stored again."""
        return self._messages.query_msg_by_unique_key(topic, msg_id)

    def query_msg_trace_by_id(
        self,
        msg_id: str,
        trace_topic: str = TRACE_TOPIC,
        begin: int = 0,
        end: int | None = None,
        max_num: int = DEFAULT_QUERY_NUM,
    ) -> dict[str, Any]:
        """The trace of message ``msg_id`` (its unique key) as a timeline (mqadmin
        ``queryMsgTraceById``): the trace messages of ``trace_topic`` with that key, stored
        in ``[begin, end]`` ms (newest ``max_num``), decoded into ``produce`` (Pub: group,
        client host, time, cost, status, store host, offset msg id, and queue and offset
        while the broker has the message), ``transactions`` (EndTransaction) and
        ``consume`` (per listener call: group, client host, time, retry times, cost,
        status and result), each oldest first. Records written by RocketMQ's clients read
        the same."""
        return self._messages.query_msg_trace_by_id(msg_id, trace_topic, begin, end, max_num)

    def query_msg_by_time(
        self, topic: str, begin: int, end: int | None = None, max_num: int = DEFAULT_QUERY_NUM
    ) -> list[dict[str, Any]]:
        """The first ``max_num`` messages of ``topic`` stored in ``[begin, end]`` ms (end:
        now), by store time."""
        return self._messages.query_msg_by_time(topic, begin, end, max_num)

    def query_msg_by_offset(
        self, topic: str, broker: str, queue_id: int, offset: int
    ) -> dict[str, Any]:
        """The message at queue offset ``offset`` of ``topic``'s queue ``queue_id`` on
        ``broker`` (a broker name), pulled as mqadmin ``queryMsgByOffset`` pulls it;
        ``ClientError`` when the queue has none there."""
        return self._browse.query_msg_by_offset(topic, broker, queue_id, offset)

    def queue_ranges(
        self,
        topic: str,
        begin: int | None = None,
        end: int | None = None,
        broker: str | None = None,
        queue_id: int | None = None,
    ) -> list[dict[str, Any]]:
        """Each readable queue of ``topic`` (of ``broker``, ``queue_id`` only when given)
        with the offsets ``browse_queue`` reads (mqadmin ``printMsg``): ``minOffset`` and
        ``maxOffset`` of the queue, or, with ``begin`` / ``end`` (ms), the offsets of the
        first messages stored at or after them."""
        return self._browse.queue_ranges(topic, begin, end, broker, queue_id)

    def browse_queue(
        self, topic: str, broker: str, queue_id: int, start: int, stop: int, expression: str = "*"
    ) -> Iterator[dict[str, Any]]:
        """The messages of a queue from offset ``start`` to before ``stop`` whose tag
        ``expression`` (``*``, ``TagA || TagB``) takes, read 32 per pull as the
        ``TOOLS_CONSUMER`` group (nothing is committed); it ends early at the queue's
        end."""
        return self._browse.browse_queue(topic, broker, queue_id, start, stop, expression)

    # -- dead-letter queues -----------------------------------------------------------------------

    def query_dlq(self, group: str, max_num: int = DEFAULT_QUERY_NUM) -> list[dict[str, Any]]:
        """The first ``max_num`` messages in the group's DLQ (``message_to_json``'s shape plus
        ``originTopic``, ``attempts`` and ``originMsgId``), oldest first; [] when the group has
        no DLQ yet."""
        return self._dlq.query_dlq(group, max_num)

    def resend_dlq(self, group: str, msg_id: str | None = None) -> list[dict[str, Any]]:
        """Send DLQ messages back to their original topic: the one whose msg id, offset msg id
        or origin msg id is ``msg_id``, or all of them (``msg_id`` None). Returns one row per
        message: ``msgId``, ``originTopic`` and the new ``sendMsgId`` (or ``error``).
        ``ClientError`` when ``msg_id`` is not in the DLQ."""
        return self._dlq.resend_dlq(group, msg_id)

    # -- POP groups -------------------------------------------------------------------------------

    def pop_status(
        self, group: str | None = None, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """One row per (POP consumer group, topic, broker), ``group``'s only when given:
        ``group``, ``topic``, ``brokerName``, ``inFlight`` (popped, still invisible),
        ``reviveBacklog`` (invisible time passed, not revived yet), ``retryTopic``,
        ``retryBacklog``, ``acked``, ``revived``, ``dlq`` (since the broker started) and
        ``popOffsets`` (queue id → where the next pop begins). Asks ``broker``, or every
        master of ``cluster`` (of the only cluster by default)."""
        return self._pop.pop_status(group, broker, cluster)

    # -- transactions -----------------------------------------------------------------------------

    # -- ACL 1.0 (plain_acl.yml) ---------------------------------------------------------

    def update_acl_config(self, access_key: str, secret_key: str, **options: Any) -> list[str]:
        """Create or update an account on each target broker (mqadmin ``updateAclConfig``):
        options ``white_remote_address``, ``default_topic_perm``, ``default_group_perm``,
        ``topic_perms`` and ``group_perms`` (lists of ``name=PERM``) replace the account's
        when given, ``admin`` always; ``broker`` / ``cluster`` choose the targets. The names
        of the brokers that took it."""
        return self._acl.update_acl_config(access_key, secret_key, **options)

    def delete_acl_config(
        self, access_key: str, *, broker: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """Delete an account (mqadmin ``deleteAclConfig``)."""
        return self._acl.delete_acl_config(access_key, broker=broker, cluster=cluster)

    def update_global_white_addrs(
        self,
        addresses: list[str],
        *,
        acl_file: str | None = None,
        broker: str | None = None,
        cluster: str | None = None,
    ) -> list[str]:
        """Replace ``globalWhiteRemoteAddresses`` (mqadmin ``updateGlobalWhiteAddr``);
        ``acl_file``, when given, must be the broker's ACL file."""
        return self._acl.update_global_white_addrs(
            addresses, acl_file=acl_file, broker=broker, cluster=cluster
        )

    def acl_config_version(
        self, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """Each target broker's ``dataVersion`` of its ACL file (mqadmin
        ``clusterAclConfigVersion``): ``clusterName``, ``brokerName``, ``brokerAddr``,
        ``version`` ({counter, timestamp}) and ``allAclFileVersion`` (path → version)."""
        return self._acl.acl_config_version(broker, cluster)

    def trans_status(
        self, group: str | None = None, broker: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """One row per (broker, producer group) with half messages pending, ``group``'s only
        when given: ``brokerName``, ``producerGroup``, ``pending``, ``oldestAgeMs``,
        ``maxCheckTimes``, ``producersOnline``, ``transactionIds`` (the first few).
        Asks ``broker``, or every master of ``cluster`` (of the only cluster by default)."""
        return self._transactions.trans_status(group, broker, cluster)

    def resume_check_half_message(self, msg_id: str) -> str:
        """Put the discarded half message ``msg_id`` back in its broker's half queue with no
        check counted, so its producer group is asked about it again; returns its offset
        message id. ``msg_id`` is its offset message id or, as mqadmin tries next, its unique
        key (the transaction id), looked up in ``TRANS_CHECK_MAX_TIME_TOPIC``: both are 32 hex
        digits."""
        return self._transactions.resume_check_half_message(msg_id)

    # -- consume queues and clean-ups -------------------------------------------------------------

    def query_consume_queue(
        self,
        topic: str,
        queue_id: int,
        index: int,
        count: int = 10,
        group: str | None = None,
        broker: str | None = None,
    ) -> dict[str, Any]:
        """Up to ``count`` consume-queue units of ``topic``'s queue ``queue_id`` from queue
        offset ``index``: RocketMQ's ``QueryConsumeQueueResponseBody``, ``{"minQueueIndex",
        "maxQueueIndex", "queueData": [{"physicOffset", "physicSize", "tagsCode", "eval",
        …}]}``, with ``subscriptionData`` and ``filterData`` when ``group`` is given
        (``eval``: the group's tag filter takes the unit), and ``remark`` when ``index``
        lies outside the queue (no units then). ``broker`` (a name or an address) may be
        left out when a single broker serves the topic."""
        return self._queues.query_consume_queue(topic, queue_id, index, count, group, broker)

    def consume_time_span(self, topic: str, group: str) -> list[dict[str, Any]]:
        """Per queue of ``topic`` on every broker serving it, sorted: ``message_queue``,
        the store times (ms) of its first and last message (``min_timestamp``,
        ``max_timestamp``) and of the last one ``group`` consumed (``consume_timestamp``),
        and ``delay_ms``, how long ago the next one to consume was stored (0 when the
        group is at the end). -1: no such message."""
        return self._queues.consume_time_span(topic, group)

    def system_topics(self, broker: str | None = None, cluster: str | None = None) -> list[str]:
        """The system topics of ``broker`` (default: every master of ``cluster``, or of the
        only cluster): RocketMQ's set plus each broker's cluster and broker names."""
        return self._queues.system_topics(broker, cluster)

    def clean_unused_topic(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        """Purge, on ``broker`` (default: every master of ``cluster``, or of the only
        cluster), the stored messages of topics that have no topic config there (mqadmin
        ``cleanUnusedTopic``): broker name → the topics purged."""
        return self._queues.clean_unused_topic(broker, cluster)

    def clean_expired_consume_queue(
        self, broker: str | None = None, cluster: str | None = None
    ) -> dict[str, list[str]]:
        """Purge, on ``broker`` (as ``clean_unused_topic``), the consume queues of topics
        without a topic config there whose messages all expired (mqadmin
        ``cleanExpiredCQ``): broker name → the topics purged."""
        return self._queues.clean_expired_consume_queue(broker, cluster)

    def delete_expired_commitlog(
        self, broker: str | None = None, cluster: str | None = None
    ) -> list[str]:
        """Have ``broker`` (as ``clean_unused_topic``) delete its expired CommitLog files now
        and for its next cleanup rounds, whatever ``deleteWhen`` says (RocketMQ 5's mqadmin
        ``deleteExpiredCommitLog``): the brokers asked. Files newer than
        ``fileReservedTime`` stay."""
        return self._queues.delete_expired_commitlog(broker, cluster)

    # -- statistics -------------------------------------------------------------------------------

    def broker_stats_data(self, broker: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """One statistic of ``broker`` (a name or an address), RocketMQ's
        ``BrokerStatsData``: ``{"statsMinute" | "statsHour" | "statsDay": {"sum", "tps",
        "avgpt"}}``. ``stats_name``: ``TOPIC_PUT_NUMS`` (key: a topic), ``GROUP_GET_NUMS``
        (key: ``topic@group``), ``BROKER_PUT_NUMS`` or ``BROKER_GET_NUMS`` (key: the
        cluster). A ``ResponseError`` when the broker has not counted it since it started."""
        return self._stats.broker_stats_data(broker, stats_name, stats_key)

    def stats_all(self, topic: str | None = None, active_only: bool = False) -> list[dict]:
        """mqadmin ``statsAll``: per topic (``topic`` alone when given) and group consuming
        it, the lag, the topic's put and the group's get rates over the last minute
        (``in_tps``, ``out_tps``), summed over the topic's brokers, and their counts over
        the last day (``in_msgs_24h``, ``out_msgs_24h``; the last hour's or minute's while
        the broker has run shorter). A topic nobody consumes has one row with
        ``group`` None. ``active_only``: rows with messages put or got that day only."""
        return self._stats.stats_all(topic, active_only)

    # -- send round trips -------------------------------------------------------------------------

    def send_msg_status(
        self, broker_name: str, message_size: int = 128, count: int = 50
    ) -> list[dict[str, Any]]:
        """``count`` timed sends of ``message_size`` bytes to the topic named after
        ``broker_name`` (each broker has one), after a 16-byte warm-up (mqadmin
        ``sendMsgStatus``): per send ``rtMs`` and ``sendResult`` (``SendResult.to_json``).
        A failed send raises."""
        return self._send_rt.send_msg_status(broker_name, message_size, count)

    def check_msg_send_rt(self, topic: str, amount: int = 100, size: int = 128) -> dict[str, Any]:
        """``amount`` timed sends of ``size`` bytes to ``topic``, send i to the i-th queue
        of its route round (mqadmin ``checkMsgSendRT``): ``sends`` (``brokerName``,
        ``queueId``, ``sendResult`` True/False, ``rtMs``) and ``avgRtMs`` (the first send
        left out)."""
        return self._send_rt.check_msg_send_rt(topic, amount, size)

    def cluster_rt(
        self, cluster: str | None = None, amount: int = 100, size: int = 128
    ) -> list[dict[str, Any]]:
        """``amount`` timed sends of ``size`` bytes to each broker of ``cluster`` (every
        cluster's by default), to the topic named after it (one round of mqadmin
        ``clusterRT``): per broker ``cluster``, ``brokerName``, ``rtMs`` (the average, the
        first send left out), ``successCount`` and ``failCount``."""
        return self._send_rt.cluster_rt(cluster, amount, size)

    # -- controller mode --------------------------------------------------------------------------

    def controller_meta_data(self, controller: str) -> dict[str, Any]:
        """The controller group at ``controller`` (an address): ``group``,
        ``controllerLeaderId``, ``controllerLeaderAddress``, ``isLeader``, ``peers``
        (mqadmin ``getControllerMetaData``). ``ClientError`` when controller mode is not
        enabled there."""
        return self._controller.controller_meta_data(controller)

    def elect_master(
        self, controller: str, cluster: str, broker_name: str, broker_id: int
    ) -> dict[str, Any]:
        """Have the controller make broker ``broker_id`` of ``broker_name`` its group's
        master (mqadmin ``electMaster``): ``masterBrokerId``, ``masterAddress``,
        ``masterEpoch``, ``syncStateSetEpoch`` and ``brokerMemberGroup``. ``ClientError``
        when controller mode is not enabled there."""
        return self._controller.elect_master(controller, cluster, broker_name, broker_id)

    def clean_broker_metadata(
        self,
        controller: str,
        broker_name: str,
        broker_ids: str | None = None,
        cluster: str | None = None,
        clean_living_broker: bool = False,
    ) -> None:
        """Have the controller forget ``broker_name``'s members (``broker_ids``:
        ``1;2;3``, default all) (mqadmin ``cleanBrokerMetadata``). ``ClientError`` when
        controller mode is not enabled there."""
        self._controller.clean_broker_metadata(
            controller, broker_name, broker_ids, cluster, clean_living_broker
        )

    def broker_epoch(
        self, broker_name: str | None = None, cluster: str | None = None
    ) -> list[dict[str, Any]]:
        """Each address of ``broker_name`` (or of the brokers of ``cluster``, default all)
        with its epochs (mqadmin ``getBrokerEpoch``, RocketMQ's ``EpochEntryCache``:
        ``clusterName``, ``brokerName``, ``brokerId``, ``epochList`` of ``{epoch,
        startOffset, endOffset}``, ``maxOffset``) and ``brokerAddr``. ``ClientError`` for a
        broker not in controller mode."""
        return self._controller.broker_epoch(broker_name, cluster)

    # -- namesrvs ---------------------------------------------------------------------------------

    def update_kv_config(self, namespace: str, key: str, value: str) -> None:
        """Create or replace ``key`` of ``namespace`` on every namesrv (mqadmin
        ``updateKvConfig -s -k -v``)."""
        self._namesrv.update_kv_config(namespace, key, value)

    def delete_kv_config(self, namespace: str, key: str) -> None:
        """Remove ``key`` of ``namespace`` from every namesrv (mqadmin ``deleteKvConfig``);
        a key that is not there is no error."""
        self._namesrv.delete_kv_config(namespace, key)

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        """The value of ``key`` in ``namespace``, None when the namesrv has none."""
        return self._namesrv.get_kv_config(namespace, key)

    def kv_list(self, namespace: str) -> dict[str, str]:
        """Every key and value of ``namespace`` (empty when the namesrv has none)."""
        return self._namesrv.kv_list(namespace)

    def update_order_conf(self, topic: str, conf: str) -> None:
        """Make ``topic`` ordered with ``conf``'s queues, ``"brokerA:4;brokerB:4"``
        (mqadmin ``updateOrderConf -m put``): its ``ORDER_TOPIC_CONFIG`` entry on every
        namesrv. A malformed ``conf`` is a ``ConfigError`` before any namesrv is asked.
        Namesrvs hand it out in routes only with ``orderMessageEnable``."""
        self._namesrv.update_order_conf(topic, conf)

    def delete_order_conf(self, topic: str) -> None:
        """Make ``topic`` unordered again (mqadmin ``updateOrderConf -m delete``)."""
        self._namesrv.delete_order_conf(topic)

    def order_conf(self, topic: str) -> str | None:
        """``topic``'s order conf, None when it has none (``updateOrderConf -m get``)."""
        return self._namesrv.order_conf(topic)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        """The topics the brokers of ``cluster`` serve, sorted (none for an unknown one)."""
        return self._namesrv.topics_by_cluster(cluster)

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Take ``broker_name`` out of producers' routes on every namesrv (mqadmin
        ``wipeWritePerm -b``): its queues become read-only in every topic's route (the
        broker itself still takes writes). By namesrv address, the number of topics it
        changed. The broker's next registration with a new dataVersion (a topic change,
        a restart) gives the perm back; ``add_write_perm`` does it at once."""
        return self._namesrv.wipe_write_perm(broker_name)

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        """Make ``broker_name``'s queues read-write again in every topic's route, on every
        namesrv (mqadmin ``addWritePerm -b``); by namesrv address, the topics changed."""
        return self._namesrv.add_write_perm(broker_name)

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        """Each namesrv's settings by address (mqadmin ``getNamesrvConfig``)."""
        return self._namesrv.namesrv_config()

    def update_namesrv_config(self, key: str, value: str) -> None:
        """Set ``key`` on every namesrv (mqadmin ``updateNamesrvConfig -k -v``): only
        ``orderMessageEnable`` changes at run time, on the running namesrvs; anything else
        is refused by name (``namesrv.namesrv_config``)."""
        self._namesrv.update_namesrv_config(key, value)
