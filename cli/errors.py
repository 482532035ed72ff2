"""Turn shmq errors into one-line CLI messages with a non-zero exit."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click


def cli_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Report a ``ShmqError`` as ``error: ...`` on stderr and exit 1, without a traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from shmq.errors import ShmqError

        try:
            return func(*args, **kwargs)
        except ShmqError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper
