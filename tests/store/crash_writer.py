"""Child process for the crash tests: appends numbered messages to a store until killed.

Usage: ``python crash_writer.py STORE_DIR MODE``. It recovers the store, continues the
sequence after the last message it finds, and prints ``flushed N`` after every flush that
covers messages up to sequence number N (so the parent knows what must survive a SIGKILL).
MODE is ``single`` (one put per message) or ``batch`` (put_batch).
"""

from __future__ import annotations

import sys

from shmq.store import MessageStore

TOPIC = "Crash"
QUEUES = 3
SMALL = {
    "mapped_file_size_commit_log": 64 * 1024,
    "mapped_file_size_consume_queue": 20 * 64,
    "max_hash_slot_num": 256,
    "max_index_num": 512,
}


def body_for(seq: int) -> bytes:
    """A body that carries its own sequence number and a length and content derived from it."""
    return seq.to_bytes(8, "big") + bytes([seq % 251]) * (seq * 7919 % 900)


def main() -> None:
    root, mode = sys.argv[1], sys.argv[2]
    store = MessageStore.open(root, **SMALL)
    seq = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))  # all recovered
    print(f"start {seq}", flush=True)
    while True:
        if mode == "single":
            for _ in range(20):
                store.put(TOPIC, seq % QUEUES, body_for(seq), keys=f"s{seq}")
                seq += 1
        else:
            # one batch per round, to a rotating queue: append order is sequence order
            store.put_batch(TOPIC, seq % QUEUES, [body_for(s) for s in range(seq, seq + 9)])
            seq += 9
        store.dispatch()
        store.flush()
        print(f"flushed {seq - 1}", flush=True)


if __name__ == "__main__":
    main()
