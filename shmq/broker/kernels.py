"""The broker group's kernels, compiled before its agents start.

At a host's first start (or after an upgrade) numba compiles shmq's kernels: seconds each.
Left to the agents, each would compile what it needs while clients wait, several of them
the same record parser at once. Instead ``compile_kernels`` runs every agent's, server's
and consumer's warm-up once, split in two halves that share little (the write side and
the read side) and run in parallel where there is a core for each, then records that the
cache is complete (``shmq.kernel_cache.mark_warm``). Later starts find it complete, skip
all of this and let each process load what it uses; the modules whose warm-ups run here are
imported only then, so a later start's supervisor does not import the agents' code (the
agent template does).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os

from shmq import kernel_cache


def warm_write_side() -> None:
    """The writer's, the TCP send path's, the schedule agent's and a producer's kernels."""
    from shmq.broker.agents import schedule, writer
    from shmq.broker.processors import send

    writer.warm_up()
    send.warm_up()
    schedule.warm_up()


def warm_read_side() -> None:
    """Reput's, the consumers' (local and over TCP), the TCP pull path's and the HA
    client's kernels."""
    from shmq.broker.agents import reput
    from shmq.broker.processors import pull
    from shmq.codec import pull_body
    from shmq.store.warm_up import warm_up_reads

    reput.warm_up()
    warm_up_reads()
    pull.warm_up()
    pull_body.warm_up()


def compile_kernels() -> bool:
    """Compile every kernel into the cache unless that was done for these sources already;
    True when it compiled. The read side runs in a spawned process when this host has a
    second CPU for it, the write side here (the supervisor uses its kernels)."""
    if kernel_cache.is_warm():
        return False
    if len(os.sched_getaffinity(0)) < 2:
        warm_read_side()
        warm_write_side()
    else:
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
            read_side = pool.submit(warm_read_side)
            warm_write_side()
            read_side.result()
    kernel_cache.mark_warm()
    return True
