"""The systems under test, one module each; ``PEERS`` maps the ``--systems`` names to them.

Peer classes import their third-party library only when asked whether they can run, so a
missing package makes that peer skipped with the reason instead of breaking the bench."""

from __future__ import annotations

from bench.peers.base import Peer
from bench.peers.fifo import FasterFifoPeer
from bench.peers.mp_queue import MpQueuePeer
from bench.peers.rabbitmq import RabbitMqPeer
from bench.peers.redis_streams import RedisStreamsPeer
from bench.peers.shmq_peer import ShmqPeer
from bench.peers.zmq_ipc import ZmqPeer

PEERS: dict[str, Peer] = {
    p.system: p
    for p in (
        ShmqPeer(),
        MpQueuePeer(),
        FasterFifoPeer(),
        ZmqPeer(),
        RedisStreamsPeer(),
        RabbitMqPeer(),
    )
}
