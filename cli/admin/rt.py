"""``shmq admin send-msg-status``, ``check-msg-send-rt`` and ``cluster-rt`` (mqadmin
``sendMsgStatus``, ``checkMsgSendRT`` and ``clusterRT``): timed sends from this host, per
send or averaged per broker; registered on the ``admin`` group by ``shmq_cli.admin``."""

from __future__ import annotations

import time

import click

from shmq_cli.admin import admin
from shmq_cli.admin.output import open_admin, options, print_json, show

_SIZE = click.option("-s", "--size", "size", type=click.IntRange(1, 4 * 1024 * 1024),
                     default=128, show_default=True, help="Body size in bytes.")  # fmt: skip
_AMOUNT = click.option("-a", "--amount", type=click.IntRange(1), default=100, show_default=True,
                       help="Messages to send.")  # fmt: skip


@admin.command("send-msg-status")
@click.option("-b", "--broker-name", required=True, help="The broker (its own topic is sent to).")
@click.option("-s", "--message-size", "size", type=click.IntRange(1, 4 * 1024 * 1024),
              default=128, show_default=True, help="Body size in bytes.")  # fmt: skip
@click.option("-c", "--count", type=click.IntRange(1), default=50, show_default=True)
@options
def send_msg_status(broker_name: str, size: int, count: int, namesrv: str, as_json: bool) -> None:
    """Send to a broker's own topic and print each send's RT and result (mqadmin
    sendMsgStatus)."""
    with open_admin(namesrv) as a:
        rows = a.send_msg_status(broker_name, size, count)
    if as_json:
        print_json(rows)
        return
    for row in rows:
        r = row["sendResult"]
        click.echo(f"rt={row['rtMs']:.2f}ms, SendResult [sendStatus={r['sendStatus']}, "
                   f"msgId={r['msgId']}, offsetMsgId={r['offsetMsgId']}, messageQueue="
                   f"[topic={r['topic']}, brokerName={r['brokerName']}, queueId={r['queueId']}],"
                   f" queueOffset={r['queueOffset']}]")  # fmt: skip


@admin.command("check-msg-send-rt")
@click.option("-t", "--topic", required=True)
@_AMOUNT
@_SIZE
@options
def check_msg_send_rt(topic: str, amount: int, size: int, namesrv: str, as_json: bool) -> None:
    """Send to every queue of a topic in turn and print each send's RT, and the average
    (mqadmin checkMsgSendRT)."""
    with open_admin(namesrv) as a:
        result = a.check_msg_send_rt(topic, amount, size)
    if as_json:
        print_json(result)
        return
    rows = [[s["brokerName"], s["queueId"], s["sendResult"], f"{s['rtMs']:.2f}"]
            for s in result["sends"]]  # fmt: skip
    show(["Broker Name", "QID", "Send Result", "RT ms"], rows, f"sends to {topic}")
    click.echo(f"Avg RT: {result['avgRtMs']:.2f}")
    if not all(s["sendResult"] for s in result["sends"]):
        raise SystemExit(1)


@admin.command("cluster-rt")
@_AMOUNT
@_SIZE
@click.option("-c", "--cluster", help="Cluster name (default: every cluster).")
@click.option("-p", "--print-log", type=click.BOOL, default=False, show_default=True,
              help="true/false: print time|machine room|cluster|broker|RT lines.")  # fmt: skip
@click.option("-m", "--machine-room", default="noname", show_default=True)
@click.option("-i", "--interval", type=click.IntRange(0), default=10, show_default=True,
              help="Seconds between rounds.")  # fmt: skip
@click.option("--rounds", type=click.IntRange(0), default=0, show_default=True,
              help="Rounds to run (0: until interrupted, as mqadmin).")  # fmt: skip
@options
def cluster_rt(
    amount: int, size: int, cluster: str | None, print_log: bool, machine_room: str,
    interval: int, rounds: int, namesrv: str, as_json: bool,
) -> None:  # fmt: skip
    """Send to every broker of a cluster and print each broker's average RT and its
    successes and failures, every interval (mqadmin clusterRT)."""
    done = 0
    with open_admin(namesrv) as a:
        while True:
            rows = a.cluster_rt(cluster, amount, size)
            if as_json:
                print_json(rows)
            elif print_log:
                now = time.strftime("%Y-%m-%d %H:%M:%S")
                for r in rows:
                    click.echo(f"{now}|{machine_room}|{r['cluster']}|{r['brokerName']}|"
                               f"{round(r['rtMs'])}")  # fmt: skip
            else:
                show(["Cluster Name", "Broker Name", "RT ms", "successCount", "failCount"],
                     [[r["cluster"], r["brokerName"], f"{r['rtMs']:.2f}", r["successCount"],
                       r["failCount"]] for r in rows])  # fmt: skip
            done += 1
            if rounds and done >= rounds:
                return
            time.sleep(interval)
