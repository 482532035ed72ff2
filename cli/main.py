"""The ``shmq`` click app: global options, lazy command registry, one-line errors.

Each command group lives in its own module (``shmq_cli.<module>``) and is registered here in
``COMMANDS`` as ``"name": "module:attribute"``. Modules are imported only when their command
is invoked or listed in ``--help``, and they must not import numba-using modules (``shmq.store``,
``shmq.codec``, ...) at module level: import those inside the command function, so a command
that needs no kernel starts in about 0.3 s.

Errors: a ``ShmqError`` (or an ``OSError``) escaping a command is printed as one line,
``error: ...``, on stderr with exit status 1 (``-vv`` also logs the traceback). Usage errors
are click's (exit status 2). A closed stdout (``shmq admin topic-list | head -1``) ends a
command quietly with exit status 0, as Unix tools do.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import IO, Any

import click

from shmq import __version__
from shmq.errors import ShmqError

# Command name -> "module:attribute". Later issues add their command groups here.
COMMANDS: dict[str, str] = {
    "admin": "shmq_cli.admin:admin",
    "broker": "shmq_cli.server:broker",
    "consume": "shmq_cli.client_cmds:consume",
    "dashboard": "shmq_cli.dashboard:dashboard",
    "namesrv": "shmq_cli.namesrv:namesrv",
    "produce": "shmq_cli.client_cmds:produce",
    "start": "shmq_cli.server:start",
    "status": "shmq_cli.server:status",
    "stop": "shmq_cli.server:stop",
    "store-demo": "shmq_cli.store_demo:store_demo",
    "top": "shmq_cli.top:top",
    "tune": "shmq_cli.tune:tune",
}

_LOGGERS = ("shmq", "shmq_cli")
log = logging.getLogger(__name__)


class CliError(click.ClickException):
    """A failure reported as one ``error: ...`` line on stderr, exit status 1."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", file=file or sys.stderr)


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use (see ``COMMANDS``)."""

    def __init__(self, *args: Any, lazy_commands: dict[str, str] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands:
            return self._load(cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, cmd_name: str) -> click.Command:
        module_name, _, attr = self.lazy_commands[cmd_name].partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module_name}:{attr} is not a click command")
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # the reader went away: end quietly, with stdout on /dev/null so that the flush
            # at exit cannot fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except (ShmqError, OSError) as exc:
            log.debug("command failed", exc_info=True)
            raise CliError(_one_line(exc)) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, ShmqError) else f"{type(exc).__name__}: {text}"


class _CurrentStderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time (click's test runner swaps it)."""

    @property  # type: ignore[override]
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, _value: IO[str]) -> None:
        pass


def setup_logging(verbose: int) -> None:
    """WARNING by default, INFO with ``-v``, DEBUG with ``-vv``, for shmq's loggers."""
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(level)
        if not any(isinstance(h, _CurrentStderrHandler) for h in logger.handlers):
            handler = _CurrentStderrHandler()
            handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
            )
            logger.addHandler(handler)


@click.group(
    "shmq",
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "-V", "--version", prog_name="shmq")
@click.option("-v", "--verbose", count=True, help="More logging: -v info, -vv debug.")
def cli(verbose: int) -> None:
    """shmq: Apache RocketMQ's design as a shared-memory message broker for one host.

    Start a NameServer and a broker with `shmq start` (add --daemon to run them in the
    background), then `shmq produce` and `shmq consume`; `shmq status` and `shmq admin` show
    what runs, `shmq stop` stops it. Store files are RocketMQ 4.9 byte-compatible.
    """
    setup_logging(verbose)


if __name__ == "__main__":  # pragma: no cover
    cli()
