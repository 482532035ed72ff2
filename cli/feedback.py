"""What the terminal shows while a command waits: a line (and a spinner on a terminal) for a
step that turns out to be slow, and sizes in words a person reads."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import ClassVar

import click

SLOW_AFTER_S = 1.0


@contextlib.contextmanager
def say_if_slow(message: str, after: float = SLOW_AFTER_S) -> Iterator[None]:
    """Run the body silently; if it is still running after ``after`` seconds, show
    ``message`` on stderr (with a rich spinner on a terminal, one line otherwise). A step
    that is only slow the first time (numba compiling into its cache) so says nothing later."""
    lock = threading.Lock()
    shown: list = []
    done = False

    def show() -> None:
        with lock:
            if done:
                return
            if sys.stderr.isatty():
                from rich.console import Console

                status = Console(stderr=True).status(message)
                status.start()
                shown.append(status)
            else:
                click.echo(message, err=True)

    timer = threading.Timer(after, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            done = True
            timer.cancel()
            for status in shown:
                status.stop()


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 2147483648 -> '2.0 GiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def plural(n: int, word: str) -> str:
    """``plural(1, "message")`` -> '1 message', ``plural(5000, ...)`` -> '5000 messages'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class ByteSize(click.ParamType):
    """A size in bytes: ``67108864``, ``64M``, ``64MiB``, ``1G`` (binary multiples)."""

    name = "size"
    _UNITS: ClassVar[dict[str, int]] = {
        "": 1,
        "K": 1 << 10,
        "M": 1 << 20,
        "G": 1 << 30,
        "T": 1 << 40,
    }

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
        digits = text.rstrip("KMGT")
        unit = text[len(digits) :]
        if not digits.isdigit() or unit not in self._UNITS:
            self.fail(f"{value!r} is not a size (e.g. 67108864, 64M, 1G)", param, ctx)
        size = int(digits) * self._UNITS[unit]
        if size <= 0:
            self.fail(f"{value!r}: a size must be positive", param, ctx)
        return size
