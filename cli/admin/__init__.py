"""``shmq admin``: cluster administration, mirroring RocketMQ's ``mqadmin``.

Each mqadmin sub-command has a kebab-case twin with the same short options (``updateTopic``
→ ``shmq admin update-topic -t T -r 8 -w 8 -c DefaultCluster``). Every command takes
``-n/--namesrv`` and ``--json`` (machine-readable JSON on stdout, for scripts); without
``--json`` results are printed as tables. Failures are one ``error: ...`` line on stderr,
exit status 1 (``shmq_cli.main``). Client modules are imported inside the commands, so
``shmq --help`` stays light.
"""

from __future__ import annotations

import time
from typing import Any

import click

from shmq_cli.admin.output import (
    TIMESTAMP,
    body_preview,
    local_time,
    open_admin,
    options,
    print_json,
    show,
    show_message,
    show_messages,
    show_pairs,
)


@click.group("admin")
def admin() -> None:
    """Administer topics, groups, offsets and brokers (RocketMQ's mqadmin)."""


# -- topics ---------------------------------------------------------------------------------------


@admin.command("update-topic")
@click.option("-t", "--topic", required=True)
@click.option("-r", "--read-queue-nums", type=click.IntRange(1, 1024), default=8,
              show_default=True)  # fmt: skip
@click.option("-w", "--write-queue-nums", type=click.IntRange(1, 1024), default=8,
              show_default=True)  # fmt: skip
@click.option("-p", "--perm", type=click.IntRange(0, 15), default=6, show_default=True,
              help="Permission bits: 4 read, 2 write, 1 inherit.")  # fmt: skip
@click.option("-b", "--broker", help="Broker name or address (default: the whole cluster).")
@click.option("-c", "--cluster", help="Cluster name (default: the only cluster).")
@options
def update_topic(
    topic: str,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    broker: str | None,
    cluster: str | None,
    namesrv: str,
    as_json: bool,
) -> None:
    """Create or change a topic (mqadmin updateTopic)."""
    with open_admin(namesrv) as a:
        brokers = a.update_topic(
            topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            broker=broker,
            cluster=cluster,
        )
    result = {
        "topic": topic,
        "readQueueNums": read_queue_nums,
        "writeQueueNums": write_queue_nums,
        "perm": perm,
        "brokers": brokers,
    }
    if as_json:
        print_json(result)
    else:
        click.echo(
            f"topic {topic} created or updated on {', '.join(brokers)}: {read_queue_nums} read"
            f" / {write_queue_nums} write queues, perm {perm}"
        )


@admin.command("delete-topic")
@click.option("-t", "--topic", required=True)
@click.option("-c", "--cluster", help="Cluster name (default: the brokers serving the topic).")
@options
def delete_topic(topic: str, cluster: str | None, namesrv: str, as_json: bool) -> None:
    """Delete a topic, its stored messages and its groups' offsets from its brokers, and
    its route from the namesrv (mqadmin deleteTopic)."""
    with open_admin(namesrv) as a:
        brokers = a.delete_topic(topic, cluster)
    if as_json:
        print_json({"topic": topic, "brokers": brokers})
    else:
        click.echo(f"topic {topic} deleted from {', '.join(brokers)} and the namesrv")


@admin.command("topic-list")
@options
def topic_list(namesrv: str, as_json: bool) -> None:
    """Every topic the namesrv routes (mqadmin topicList)."""
    with open_admin(namesrv) as a:
        topics = a.topic_list()
    if as_json:
        print_json(topics)
    else:
        for topic in topics:
            click.echo(topic)


@admin.command("topic-route")
@click.option("-t", "--topic", required=True)
@options
def topic_route(topic: str, namesrv: str, as_json: bool) -> None:
    """A topic's brokers and queue counts (mqadmin topicRoute)."""
    with open_admin(namesrv) as a:
        route = a.topic_route(topic)
    if as_json:
        print_json(route)
        return
    addrs = {b["brokerName"]: b for b in route.get("brokerDatas", [])}
    rows = []
    for q in route.get("queueDatas", []):
        b = addrs.get(q["brokerName"], {})
        ids = ", ".join(f"{i}={a}" for i, a in sorted(b.get("brokerAddrs", {}).items()))
        rows.append([q["brokerName"], b.get("cluster", ""), ids, q["readQueueNums"],
                     q["writeQueueNums"], q["perm"]])  # fmt: skip
    show(["broker", "cluster", "addresses", "read", "write", "perm"], rows, f"route of {topic}")


@admin.command("topic-status")
@click.option("-t", "--topic", required=True)
@options
def topic_status(topic: str, namesrv: str, as_json: bool) -> None:
    """Min/max offset and last update time of every queue (mqadmin topicStatus)."""
    with open_admin(namesrv) as a:
        queues = a.topic_status(topic)
    if as_json:
        print_json([q.to_json() for q in queues])
        return
    rows = [[q.broker_name, q.queue_id, q.min_offset, q.max_offset,
             local_time(q.last_update_timestamp)] for q in queues]  # fmt: skip
    show(["broker", "queue", "min offset", "max offset", "last updated"], rows, topic)


# -- consumers ------------------------------------------------------------------------------------


@admin.command("consumer-progress")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-t", "--topic", help="Only this topic.")
@options
def consumer_progress(group: str, topic: str | None, namesrv: str, as_json: bool) -> None:
    """Broker offset, consumer offset and lag per queue (mqadmin consumerProgress)."""
    with open_admin(namesrv) as a:
        progress = a.consumer_progress(group, topic)
    if as_json:
        print_json(progress.to_json())
        return
    rows = [[q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.diff,
             local_time(q.last_timestamp)] for q in progress.queues]  # fmt: skip
    columns = ["topic", "broker", "queue", "broker offset", "consumer offset", "diff", "last time"]
    show(columns, rows, f"group {group}")
    click.echo(f"Consume TPS: {progress.consume_tps:.2f}")
    click.echo(f"Diff Total: {progress.diff_total}")
    click.echo(f"Retry backlog: {progress.retry_diff}")
    click.echo(f"DLQ messages: {progress.dlq_messages}")


@admin.command("query-dlq")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("--max-num", type=click.IntRange(1, 65536), default=64, show_default=True)
@options
def query_dlq(group: str, max_num: int, namesrv: str, as_json: bool) -> None:
    """What the group gave up on: its dead-letter queue, with each message's original
    topic and the attempts it had."""
    with open_admin(namesrv) as a:
        found = a.query_dlq(group, max_num)
    if as_json:
        print_json(found)
        return
    rows = [[m["msgId"], m["originTopic"], m["attempts"], local_time(m["storeTimestamp"]),
             m["originMsgId"], body_preview(m)] for m in found]  # fmt: skip
    columns = ["msgId", "original topic", "attempts", "stored", "origin msgId", "body"]
    show(columns, rows, f"%DLQ%{group}: {len(found)} message(s)")


@admin.command("resend-dlq")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--msg-id", help="The DLQ message (msgId, offset msgId or origin msgId).")
@click.option("--all", "resend_all", is_flag=True, help="Every message in the DLQ.")
@options
def resend_dlq(
    group: str, msg_id: str | None, resend_all: bool, namesrv: str, as_json: bool
) -> None:
    """Send dead-lettered messages back to their original topic (they stay in the DLQ)."""
    if bool(msg_id) == resend_all:
        raise click.UsageError("give either --msg-id ID or --all")
    with open_admin(namesrv) as a:
        rows = a.resend_dlq(group, msg_id)
    if as_json:
        print_json(rows)
    else:
        table = [[r["msgId"], r["originTopic"], r.get("sendMsgId", ""), r.get("error", "")]
                 for r in rows]  # fmt: skip
        resent = sum("error" not in r for r in rows)
        show(["msgId", "original topic", "new msgId", "error"], table,
              f"resent {resent} of {len(rows)}")  # fmt: skip
    if any("error" in r for r in rows):
        raise SystemExit(1)


@admin.command("trans-status")
@click.option("-g", "--group", help="Producer group (default: every group with pending halves).")
@click.option("-b", "--broker", help="Broker name or address (default: every master).")
@click.option("-c", "--cluster", help="Cluster name.")
@options
def trans_status(
    group: str | None, broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """Half messages pending per producer group: transactions still waiting for a commit
    or rollback, and the check-backs they had."""
    with open_admin(namesrv) as a:
        rows = a.trans_status(group, broker, cluster)
    if as_json:
        print_json(rows)
        return
    table = [[r["producerGroup"], r["brokerName"], r["pending"], f"{r['oldestAgeMs'] / 1000:.1f}",
              r["maxCheckTimes"], r["producersOnline"], " ".join(r["transactionIds"][:3])]
             for r in rows]  # fmt: skip
    columns = ["group", "broker", "pending", "oldest (s)", "checks", "producers", "transaction ids"]
    show(columns, table, f"{sum(r['pending'] for r in rows)} half message(s) pending")


@admin.command("resume-check-half-msg")
@click.option(
    "-i", "--msg-id", required=True, help="Offset message id, or transaction id, of the half."
)
@options
def resume_check_half_msg(msg_id: str, namesrv: str, as_json: bool) -> None:
    """Check a half message again that was discarded after transactionCheckMax checks
    (mqadmin resumeCheckHalfMessage): its producer group is asked for its state again."""
    with open_admin(namesrv) as a:
        offset_id = a.resume_check_half_message(msg_id)
    if as_json:
        print_json({"msgId": msg_id, "offsetMsgId": offset_id})
    else:
        click.echo(f"half message {offset_id} is checked again")


@admin.command("consumer-connection")
@click.option("-g", "--group", required=True, help="Consumer group.")
@options
def consumer_connection(group: str, namesrv: str, as_json: bool) -> None:
    """A group's online consumers and subscriptions (mqadmin consumerConnection)."""
    with open_admin(namesrv) as a:
        conn = a.consumer_connection(group)
    if as_json:
        print_json(conn)
        return
    _show_connections(conn, group)
    subs = [[t, s.get("subString", "")] for t, s in sorted(conn["subscriptionTable"].items())]
    show(["topic", "sub expression"], subs, "subscriptions")
    for key in ("consumeType", "messageModel", "consumeFromWhere"):
        click.echo(f"{key}: {conn.get(key, '')}")


@admin.command("producer-connection")
@click.option("-g", "--group", required=True, help="Producer group.")
@options
def producer_connection(group: str, namesrv: str, as_json: bool) -> None:
    """A group's producers: over TCP and through shared memory (mqadmin
    producerConnection)."""
    with open_admin(namesrv) as a:
        conn = a.producer_connection(group)
    if as_json:
        print_json(conn)
        return
    _show_connections(conn, group)


def _show_connections(conn: dict, group: str) -> None:
    """A ``ConsumerConnection`` or ``ProducerConnection``'s ``connectionSet`` as a table."""
    rows = [[c.get("clientId"), c.get("clientAddr"), c.get("language"), c.get("version")]
            for c in conn.get("connectionSet", [])]  # fmt: skip
    show(["client id", "client address", "language", "version"], rows, f"group {group}")


@admin.command("consumer-status")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-i", "--client-id", help="Only this member (default: every online member).")
@click.option("-s", "--jstack", is_flag=True, help="Add each member's thread dump.")
@options
def consumer_status(
    group: str, client_id: str | None, jstack: bool, namesrv: str, as_json: bool
) -> None:
    """What each online member of a group is doing: its queues, committed offsets and
    messages pulled but not yet consumed (mqadmin consumerStatus)."""
    with open_admin(namesrv) as a:
        infos = a.consumer_status(group, client_id, jstack)
    if as_json:
        print_json(infos)
        return
    for cid, info in infos.items():
        props = info.get("properties", {})
        rows = [[q["topic"], q["brokerName"], q["queueId"], q["commitOffset"],
                 q["cachedMsgCount"], f"{q['cachedMsgMinOffset']}-{q['cachedMsgMaxOffset']}"
                 if q["cachedMsgCount"] else "", "yes" if q["locked"] else "",
                 _ago(q["lastPullTimestamp"]), _ago(q["lastConsumeTimestamp"])]
                for q in info["mqTable"]]  # fmt: skip
        show(["topic", "broker", "queue", "committed", "cached", "cached offsets", "locked",
              "last pull", "last consume"], rows, f"{cid} ({props.get('PROP_CONSUME_TYPE', '')}"
             f"{', orderly' if props.get('PROP_CONSUMEORDERLY') == 'true' else ''})")  # fmt: skip
        subs = ", ".join(f"{s['topic']} ({s['subString']})" for s in info["subscriptionSet"])
        click.echo(f"subscriptions: {subs}")
        counters = info.get("userConsumerInfo", {})
        if counters:
            click.echo("counters: " + ", ".join(f"{k} {v}" for k, v in sorted(counters.items())))
        if info.get("jstack"):
            click.echo(info["jstack"])


def _ago(ms: int) -> str:
    """How long ago an epoch-ms instant was, for a table cell."""
    if not ms:
        return ""
    return f"{max(0.0, time.time() - ms / 1000):.1f} s ago"


# -- messages -------------------------------------------------------------------------------------


@admin.command("query-msg-by-id")
@click.option("-i", "--msg-id", required=True, help="Offset msg id (or a unique key, with -t).")
@click.option("-t", "--topic", help="The topic, to look a unique key up.")
@click.option("-g", "--group", help="With -d: have this consumer group's member consume it.")
@click.option("-d", "--client-id", help="With -g: the member (a client id) to consume it now.")
@options
def query_msg_by_id(
    msg_id: str, topic: str | None, group: str | None, client_id: str | None, namesrv: str,
    as_json: bool,
) -> None:  # fmt: skip
    """A message by its offset message id (mqadmin queryMsgById); with -g and -d, a member
    of a consumer group consumes it with its listener now and says how that went (offsets
    do not move)."""
    if (group is None) != (client_id is None):
        raise click.UsageError("-g (group) and -d (client id) go together")
    with open_admin(namesrv) as a:
        if group is not None:
            result = a.consume_message_directly(group, client_id, msg_id, topic)
        else:
            msg = a.query_msg_by_id(msg_id, topic)
    if as_json:
        print_json(msg if group is None else result)
    elif group is None:
        show_message(msg)
    else:
        remark = f" ({result['remark']})" if result.get("remark") else ""
        click.echo(f"{client_id} of {group}: {result.get('consumeResult')}{remark} in "
                   f"{result.get('spentTimeMills', 0)} ms"
                   f"{', orderly' if result.get('order') else ''}")  # fmt: skip


@admin.command("query-msg-by-unique-key")
@click.option("-t", "--topic", required=True)
@click.option("-i", "--msg-id", required=True, help="The unique key (a producer's msgId).")
@options
def query_msg_by_unique_key(msg_id: str, topic: str, namesrv: str, as_json: bool) -> None:
    """A message by its unique key (mqadmin queryMsgByUniqueKey)."""
    with open_admin(namesrv) as a:
        msg = a.query_msg_by_unique_key(topic, msg_id)
    if as_json:
        print_json(msg)
    else:
        show_message(msg)


_MAX_NUM = click.option("--max-num", type=click.IntRange(1, 1024), default=64, show_default=True)


@admin.command("query-msg-by-key")
@click.option("-t", "--topic", required=True)
@click.option("-k", "--key", required=True)
@click.option("-b", "--begin", type=TIMESTAMP, default=0, help="Stored at or after (default 0).")
@click.option("-e", "--end", type=TIMESTAMP, help="Stored at or before (default now).")
@_MAX_NUM
@options
def query_msg_by_key(
    topic: str, key: str, begin: int, end: int | None, max_num: int, namesrv: str, as_json: bool
) -> None:
    """Messages with a key (mqadmin queryMsgByKey)."""
    with open_admin(namesrv) as a:
        messages = a.query_msg_by_key(topic, key, max_num, begin, end)
    if as_json:
        print_json(messages)
    else:
        show_messages(messages)


@admin.command("query-msg-by-time")
@click.option("-t", "--topic", required=True)
@click.option("-b", "--begin", type=TIMESTAMP, required=True, help="Stored at or after.")
@click.option("-e", "--end", type=TIMESTAMP, help="Stored at or before (default now).")
@_MAX_NUM
@options
def query_msg_by_time(
    topic: str, begin: int, end: int | None, max_num: int, namesrv: str, as_json: bool
) -> None:
    """The first messages stored within a time range."""
    with open_admin(namesrv) as a:
        messages = a.query_msg_by_time(topic, begin, end, max_num)
    if as_json:
        print_json(messages)
    else:
        show_messages(messages)


@admin.command("query-msg-trace-by-id")
@click.option("-i", "--msg-id", required=True, help="The message's id (its unique key).")
@click.option("-t", "--trace-topic", default="RMQ_SYS_TRACE_TOPIC", show_default=True)
@click.option("-b", "--begin", type=TIMESTAMP, default=0, help="Traced at or after (default 0).")
@click.option("-e", "--end", type=TIMESTAMP, help="Traced at or before (default now).")
@click.option("-c", "--max-num", type=click.IntRange(1, 1024), default=64, show_default=True,
              help="Trace messages to read, newest first.")  # fmt: skip
@options
def query_msg_trace_by_id(
    msg_id: str, trace_topic: str, begin: int, end: int | None, max_num: int, namesrv: str,
    as_json: bool,
) -> None:  # fmt: skip
    """A message's trace timeline (mqadmin queryMsgTraceById): who sent it and where it was
    stored, how its transaction ended, which groups and clients consumed it, how long each
    step took, and retries."""
    with open_admin(namesrv) as a:
        line = a.query_msg_trace_by_id(msg_id, trace_topic, begin, end, max_num)
    if as_json:
        print_json(line)
        return
    if not (line["produce"] or line["transactions"] or line["consume"]):
        click.echo(f"no trace of message {msg_id} in {trace_topic}")
        return
    show(["producer group", "client host", "send time", "cost ms", "status", "topic", "tags",
          "keys", "store host", "queue", "offset", "type"],
         [[p["group"], p["clientHost"], local_time(p["timeStamp"]), p["costTime"], p["status"],
           p["topic"], p["tags"], p["keys"], p["storeHost"], p.get("queueId", "-"),
           p.get("queueOffset", "-"), p["msgType"]] for p in line["produce"]],
         f"message {msg_id}: sent")  # fmt: skip
    if line["transactions"]:
        show(["producer group", "client host", "time", "state", "from check-back"],
             [[t["group"], t["clientHost"], local_time(t["timeStamp"]), t["transactionState"],
               t["fromTransactionCheck"]] for t in line["transactions"]],
             "transaction")  # fmt: skip
    show(["consumer group", "client host", "consume time", "retry times", "cost ms", "status",
          "result"],
         [[c["group"], c["clientHost"], local_time(c["timeStamp"]), c["retryTimes"],
           c["costTime"] if c["costTime"] is not None else "-", c["status"], c["result"] or "-"]
          for c in line["consume"]],
         "consumed")  # fmt: skip


# -- brokers --------------------------------------------------------------------------------------


@admin.command("cluster-list")
@options
def cluster_list(namesrv: str, as_json: bool) -> None:
    """Every broker of every cluster, with its counters (mqadmin clusterList)."""
    with open_admin(namesrv) as a:
        brokers = a.cluster_list()
    if as_json:
        print_json(brokers)
        return
    rows = []
    for b in brokers:
        s = b.get("status") or {}
        rows.append([b["cluster"], b["brokerName"], b["brokerId"], b["address"],
                     s.get("broker_role", ""), s.get("msgs_in", ""), s.get("msgs_dispatched", ""),
                     _tps(s, "put_tps"), _tps(s, "get_tps"), s.get("write_offset", ""),
                     s.get("flush_disk_type", ""), b.get("error") or "ok"])  # fmt: skip
    columns = ["cluster", "broker", "id", "address", "role", "msgs in", "dispatched",
               "in TPS", "out TPS", "write offset", "flush type", "status"]  # fmt: skip
    show(columns, rows)


def _tps(stats: dict, key: str) -> str:
    """The last 10 s's rate, as mqadmin clusterList's #InTPS / #OutTPS show it."""
    rates = stats.get(key)
    return f"{rates[0]:.2f}" if rates else ""


@admin.command("ha-status")
@options
def ha_status(namesrv: str, as_json: bool) -> None:
    """Replication: each master's slaves, their acked offset and lag (RocketMQ 5's
    mqadmin haStatus)."""
    with open_admin(namesrv) as a:
        brokers = a.ha_status()
    if as_json:
        print_json(brokers)
        return
    rows = []
    for b in brokers:
        head = [b.get("brokerName"), b.get("brokerId"), b["address"], b.get("brokerRole", "")]
        if b.get("error"):
            rows.append([*head, "", "", "", "", b["error"]])
        elif b.get("brokerRole") == "SLAVE":
            rows.append([*head, b.get("masterHaAddress") or "(unknown)", b.get("writeOffset"),
                         "", "", ""])  # fmt: skip
        elif not b.get("slaves"):
            rows.append([*head, "(no slave)", "", "", "", _alone(b)])
        for s in b.get("slaves", []):
            state = "in sync" if s["inSync"] else "BEHIND"
            if "inSyncStateSet" in s:  # sends wait for its acks (controller mode)
                member = "in" if s["inSyncStateSet"] else "not in"
                state += f", {member} the sync state set"
            rows.append([*head, s["address"], s["ackOffset"], s["lagBytes"], s["lagSeconds"],
                         f"{state}, {_alone(b)}" if b.get("ackAlone") else state])  # fmt: skip
    columns = ["broker", "id", "address", "role", "slave / master", "acked offset",
               "lag bytes", "lag s", "state"]  # fmt: skip
    show(columns, rows)


def _alone(broker: dict) -> str:
    return "acks without a slave" if broker.get("ackAlone") else ""


@admin.command("broker-status")
@click.option("-b", "--broker", required=True, help="Broker name or address.")
@options
def broker_status(broker: str, namesrv: str, as_json: bool) -> None:
    """A broker's runtime numbers (mqadmin brokerStatus)."""
    with open_admin(namesrv) as a:
        status = a.broker_status(broker)
    if as_json:
        print_json(status)
        return
    show_pairs(
        {k: v for k, v in sorted(status.items()) if not isinstance(v, dict | list)},
        f"broker {status.get('broker', broker)}",
    )
    agents = [[k, v.get("pid"), "yes" if v.get("alive") else "NO", v.get("restarts")]
              for k, v in status.get("agents", {}).items()]  # fmt: skip
    show(["agent", "pid", "alive", "restarts"], agents)


# -- subscription groups --------------------------------------------------------------------------


@admin.command("update-sub-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-b", "--broker", help="Broker name or address (default: the whole cluster).")
@click.option("-c", "--cluster", help="Cluster name (default: the only cluster).")
@click.option("-s", "--consume-enable", type=bool, help="true/false")
@click.option("-m", "--consume-from-min-enable", type=bool, help="true/false")
@click.option("-d", "--consume-broadcast-enable", type=bool, help="true/false")
@click.option("-q", "--retry-queue-nums", type=click.IntRange(0, 1024))
@click.option("-r", "--retry-max-times", type=click.IntRange(-1, 1024))
@click.option("-i", "--broker-id", type=click.IntRange(0))
@click.option("-w", "--which-broker-when-consume-slowly", type=click.IntRange(0))
@click.option("-a", "--notify-consumer-ids-changed-enable", type=bool, help="true/false")
@click.option("-o", "--consume-message-orderly", type=bool,
              help="true/false: the group's gRPC clients consume in order.")  # fmt: skip
@options
def update_sub_group(
    group: str,
    broker: str | None,
    cluster: str | None,
    namesrv: str,
    as_json: bool,
    **settings: Any,
) -> None:
    """Create a subscription group or change its settings (mqadmin updateSubGroup)."""
    with open_admin(namesrv) as a:
        configs = a.update_sub_group(group, broker=broker, cluster=cluster, **settings)
    _show_sub_group(group, configs, as_json)


@admin.command("examine-sub-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-b", "--broker", help="Broker name or address (default: the whole cluster).")
@click.option("-c", "--cluster", help="Cluster name (default: the only cluster).")
@options
def examine_sub_group(
    group: str, broker: str | None, cluster: str | None, namesrv: str, as_json: bool
) -> None:
    """A subscription group's settings on each broker (mqadmin examineSubGroup)."""
    with open_admin(namesrv) as a:
        configs = a.examine_sub_group(group, broker=broker, cluster=cluster)
    _show_sub_group(group, configs, as_json)


def _show_sub_group(group: str, configs: dict[str, dict[str, Any]], as_json: bool) -> None:
    """Broker name → config, as JSON or as a table of settings by broker."""
    if as_json:
        print_json(configs)
        return
    keys = sorted({k for c in configs.values() for k in c} - {"groupName"})
    rows = [[k, *(c.get(k, "") for c in configs.values())] for k in keys]
    show(["setting", *configs], rows, f"subscription group {group}")


@admin.command("delete-sub-group")
@click.option("-g", "--group", required=True, help="Consumer group.")
@click.option("-b", "--broker", help="Broker name or address (default: the whole cluster).")
@click.option("-c", "--cluster", help="Cluster name (default: the only cluster).")
@click.option("--remove-offset", is_flag=True, help="Also forget the group's offsets.")
@options
def delete_sub_group(
    group: str,
    broker: str | None,
    cluster: str | None,
    remove_offset: bool,
    namesrv: str,
    as_json: bool,
) -> None:
    """Delete a subscription group (mqadmin deleteSubGroup); without -b, its retry and
    dead-letter topics too."""
    with open_admin(namesrv) as a:
        brokers = a.delete_sub_group(
            group, broker=broker, cluster=cluster, remove_offset=remove_offset
        )
    if as_json:
        print_json({"group": group, "brokers": brokers})
    else:
        click.echo(f"subscription group {group} deleted from {', '.join(brokers)}")


# the submodules register their commands on ``admin``
import shmq_cli.admin.acl  # noqa: E402
import shmq_cli.admin.browse  # noqa: E402
import shmq_cli.admin.config  # noqa: E402
import shmq_cli.admin.controller  # noqa: E402
import shmq_cli.admin.namesrv  # noqa: E402
import shmq_cli.admin.offsets  # noqa: E402
import shmq_cli.admin.pop  # noqa: E402
import shmq_cli.admin.queues  # noqa: E402
import shmq_cli.admin.rt  # noqa: E402
import shmq_cli.admin.stats  # noqa: E402
import shmq_cli.admin.topics  # noqa: E402, F401
