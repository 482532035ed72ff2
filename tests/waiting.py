"""The one way a test waits for something another thread or process does: ``wait_for``.

A test that sleeps a fixed time and then asserts is slow when the machine is idle and flaky
when it is busy (two shared cores under a full run); polling the condition is neither. The
timeout is only how long to wait before calling it a failure, never a measured time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE_S = 0.005  # a condition met soon is seen soon...
INTERVAL_S = 0.1  # ...and a slow one is not asked in a busy loop: the predicates call
# brokers, read logs and walk stores, on the two cores the brokers under test need too


def wait_for(
    predicate: Callable[[], T],
    *,
    what: str,
    timeout: float = 30.0,
    interval: float = INTERVAL_S,
    ignore: type[BaseException] | tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    ``what`` names the condition for the failure message, which also shows the last value
    seen (or the last exception of an ``ignore`` type: a broker not up yet, a route not
    registered yet). Any other exception fails at once, so a predicate can also raise
    when what it waits on is gone (a process that exited). The pause between calls
    doubles from 5 ms up to ``interval``."""
    deadline = time.monotonic() + timeout
    pause = min(FIRST_PAUSE_S, interval)
    while True:
        try:
            value = predicate()
        except ignore as exc:
            value = exc  # type: ignore[assignment]
        else:
            if value:
                return value
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"timed out after {timeout:g} s waiting for {what}; last: {value!r}"
            )
        time.sleep(pause)
        pause = min(2 * pause, interval)
