"""Transaction producer processes for the tests (run as scripts).

``die-in-transaction``: sends one message in a transaction of ``--group``; its local
transaction writes its body to ``--out`` and kills this process with SIGKILL, so the half
message is stored and no end request is ever sent.

``transact``: one transaction per line of ``--plan`` (``body outcome``; outcome ``commit``,
``rollback``, ``unknown-commit`` or ``unknown-rollback``). The local transaction writes its
transaction id, body and outcome (``commit`` or ``rollback``) to ``--db``, the "local
database", and reports the outcome, or UNKNOW for the ``unknown-`` ones; a check-back
answers what ``--db`` says, and UNKNOW for a transaction id it has not seen, as RocketMQ
advises: its local transaction may still be running (a check-back comes
``transactionTimeOut`` after the half message was born, and a stalled producer can take
longer to write its outcome), or its half message was stored although its send failed
(the broker discards that one after ``transactionCheckMax`` checks). A send that fails
(the broker is being restarted) is tried again after 0.2 s. Runs until SIGTERM after the
plan, then closes cleanly; one JSON line per transaction to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
import time

import shmq

_STATES = {
    "commit": shmq.LocalTransactionState.COMMIT_MESSAGE,
    "rollback": shmq.LocalTransactionState.ROLLBACK_MESSAGE,
}


class PlannedListener:
    """The local transaction writes the planned outcome to the database file; a check-back
    looks it up in the index of what was written (one lookup, as a database would answer:
    reading the whole file per check-back made the producer fall behind a broker that
    asks again every 0.5 s)."""

    def __init__(self, db: str, outcomes: dict[str, str]) -> None:
        self.db = db
        self.outcomes = outcomes
        self.written: dict[str, str] = {}  # transaction id -> outcome, once in the file

    def execute_local_transaction(self, msg, arg):
        body = msg.body.decode()
        reported, _, outcome = self.outcomes[body].rpartition("-")
        with open(self.db, "a") as db:
            db.write(f"{msg.transaction_id} {body} {outcome}\n")
        self.written[msg.transaction_id] = outcome
        return shmq.LocalTransactionState.UNKNOW if reported else _STATES[outcome]

    def check_local_transaction(self, msg):
        outcome = self.written.get(msg.msg_id)
        return _STATES[outcome] if outcome else shmq.LocalTransactionState.UNKNOW


def die_in_transaction(args: argparse.Namespace) -> None:
    class Dying:
        def execute_local_transaction(self, msg, arg):
            with open(args.out, "a") as out:
                out.write(json.dumps({"body": msg.body.decode()}) + "\n")
            os.kill(os.getpid(), signal.SIGKILL)

        def check_local_transaction(self, msg):
            return shmq.LocalTransactionState.UNKNOW

    producer = shmq.TransactionProducer(args.group, args.namesrv, listener=Dying())
    producer.send_message_in_transaction(shmq.Message(args.topic, b"dying-0"))


def transact(args: argparse.Namespace) -> None:
    with open(args.plan) as f:
        plan = [line.split() for line in f if line.strip()]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    listener = PlannedListener(args.db, dict(plan))
    with (
        shmq.TransactionProducer(
            args.group, args.namesrv, listener=listener, heartbeat_interval=0.5
        ) as producer,
        open(args.out, "w") as out,
    ):
        for body, _ in plan:
            errors = []
            while len(errors) < 300:
                try:
                    r = producer.send_message_in_transaction(shmq.Message(args.topic, body))
                    row = {"body": body, "state": r.local_transaction_state.value}
                    break
                except shmq.ShmqError as exc:  # the broker is down: not sent, not executed
                    errors.append(str(exc))
                    time.sleep(0.2)
            else:
                row = {"body": body, "error": errors[-1]}
            out.write(json.dumps({**row, "failedAttempts": len(errors)}) + "\n")
            out.flush()
        stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["die-in-transaction", "transact"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--plan")
    parser.add_argument("--db")
    args = parser.parse_args()
    {"die-in-transaction": die_in_transaction, "transact": transact}[args.command](args)


if __name__ == "__main__":
    main()
