"""A producer and a consumer "on another host" (run by test_tcp_two_hosts in a private
/dev/shm, and maybe a network namespace): sends ``n`` messages to ``topic`` with the default
transport ("auto"), reads them back, and prints what it saw as one JSON line."""

from __future__ import annotations

import json
import sys
import time

from shmq.client.producer.producer import Producer
from shmq.client.transport.queue_reader import QueueReader
from shmq.message import Message


def main(namesrv: str, topic: str, n: int) -> None:
    with Producer("other-host-producer", namesrv) as producer:
        for i in range(n):
            producer.send(Message(topic, f"far-{i}".encode()))
        producer_tcp = dict(producer._transport.known)  # broker address -> took TCP
    bodies: list[str] = []
    with QueueReader("other-host-consumer", namesrv) as reader:
        deadline = time.monotonic() + 30
        for mq in reader.queues(topic):
            offset = 0
            while time.monotonic() < deadline:
                result = reader.pull(mq, offset, 32, timeout=0.5)
                if not result.messages:
                    break
                bodies += [m.body.decode() for m in result.messages]
                offset = result.next_begin_offset
        consumer_tcp = dict(reader.transport.known)
    print(json.dumps({"producer_tcp": producer_tcp, "consumer_tcp": consumer_tcp,
                      "bodies": sorted(bodies)}))  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
