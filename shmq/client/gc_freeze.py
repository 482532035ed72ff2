"""Keep numba's start-up objects out of the garbage collector's full passes.

Loading shmq's kernels leaves about a hundred thousand objects tracked by the collector
(numba's types, templates and caches). Python's full (generation 2) collection scans them
all: 35-50 ms here, during which every thread of the process stops, so a consumer's message
or a producer's send waits that long now and then. Once a process's first client has loaded
its kernels, what exists is collected once and frozen (``gc.freeze``): later collections
skip it, as the broker's agents do (``gcFreeze``). The price: a reference cycle that became
garbage before that moment is never freed. ``SHMQ_GC_FREEZE=0`` turns this off.
"""

from __future__ import annotations

import functools
import gc
import logging
import os

log = logging.getLogger(__name__)


@functools.cache
def freeze_startup_objects() -> None:
    """Collect and freeze what exists now, once per process (unless ``SHMQ_GC_FREEZE=0``)."""
    if os.environ.get("SHMQ_GC_FREEZE", "1") == "0":
        return
    gc.collect()
    gc.freeze()
    log.debug("gc: %d start-up objects frozen out of full collections", gc.get_freeze_count())
