"""``shmq tune``: the host settings RocketMQ's docs recommend, adapted to shmq.

``shmq tune check`` compares the host (kernel, ulimits, I/O scheduler, ``/dev/shm``) and the
broker's runtime settings (its ``[tuning]`` table) with a profile; ``shmq tune apply`` changes
what the check reports as WARN (root only; ``--dry-run`` prints the changes and how to undo
them; ``--persist`` also writes ``/etc/sysctl.d/99-shmq.conf``). ``--root`` points both at
another tree (tests use a fake ``/proc`` and ``/sys``). ``--json`` prints a list of
``{"setting", "current", "recommended", "status", "why"}``. The tuning package is imported
inside the commands, so ``shmq --help`` stays light.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from shmq.errors import ShmqError
from shmq_tuning.profile import available


def _options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        (
            click.option("--profile", type=click.Choice(available()), default="default",
                         show_default=True, help="Tuning profile (tuning/profiles/*.toml)."),
            click.option("--root", default="/", show_default=True,
                         type=click.Path(exists=True, file_okay=False),
                         help="Root of the /proc, /sys and /etc trees to read and write."),
            click.option("--store", "store_dir", type=click.Path(file_okay=False),
                         help="Store directory (default: the config's storePathRootDir)."),
            click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
                         help="Broker config (broker.conf or .toml) with the [tuning] table."),
            click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts)."),
        )
    ):  # fmt: skip
        f = option(f)
    return f


def _settings(profile: str, root: str, store_dir: str | None, config_path: str | None):
    from shmq.broker.config.broker_config import BrokerConfig, load_broker_config
    from shmq_tuning.check import run_checks
    from shmq_tuning.profile import load

    cfg = load_broker_config(config_path) if config_path else BrokerConfig()
    return run_checks(load(profile), root, store_dir, cfg)


def _print_rows(rows: list[Any], title: str, verbose: bool = False) -> None:
    """A full table where it fits (a terminal of 120 columns or more, or a pipe without
    ``COLUMNS``); otherwise a compact table without the "why" column, followed by the reason
    of each WARN (of every row with ``verbose``), wrapped to the width."""
    import os
    import textwrap

    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=max(console.width, 200))  # a pipe or a file: wide rows
    wide = console.width >= 120
    table = Table(title=title)
    table.add_column("setting", no_wrap=True)
    for column in ("current", "recommended", "status", *(("why",) if wide else ())):
        table.add_column(column)
    for row in rows:
        style = "green" if row.status == "OK" else "yellow"
        cells = [row.setting, row.current, row.recommended, f"[{style}]{row.status}[/{style}]"]
        table.add_row(*cells, *((row.why,) if wide else ()))
    console.print(table)
    if wide:
        return
    for row in rows:
        if verbose or row.status != "OK":
            text = f"{row.status} {row.setting}: {row.why}"
            console.print(textwrap.fill(text, console.width - 1, subsequent_indent="    "))


def _print_json(rows: list[Any]) -> None:
    click.echo(json.dumps([r.to_json() for r in rows], indent=2, ensure_ascii=False))


@click.group("tune")
def tune() -> None:
    """Check and apply host settings for shmq (RocketMQ's OS and JVM advice, adapted)."""


@tune.command("check")
@_options
@click.option("--verbose", is_flag=True, help="On a narrow terminal, the why of every row.")
def check(
    profile: str,
    root: str,
    store_dir: str | None,
    config_path: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """Compare the host and the broker's [tuning] settings with a profile."""
    rows = _settings(profile, root, store_dir, config_path)
    if as_json:
        _print_json(rows)
        return
    _print_rows(rows, f"shmq tune check: profile {profile}", verbose)
    warn = sum(r.status != "OK" for r in rows)
    hint = "; `shmq tune apply --dry-run` shows the kernel changes" if warn else ""
    click.echo(f"{len(rows)} settings, {warn} WARN{hint}")


@tune.command("apply")
@_options
@click.option("--dry-run", is_flag=True, help="Print what would change and how to undo it.")
@click.option("--persist", is_flag=True,
              help="Also write /etc/sysctl.d/99-shmq.conf and limits.d (for reboots).")  # fmt: skip
def apply(
    profile: str,
    root: str,
    store_dir: str | None,
    config_path: str | None,
    as_json: bool,
    dry_run: bool,
    persist: bool,
) -> None:
    """Change the kernel settings the check reports as WARN (root only)."""
    from shmq_tuning.apply import apply_fixes, require_root

    if not dry_run:
        require_root()
    rows = _settings(profile, root, store_dir, config_path)
    result = apply_fixes(rows, root, dry_run=dry_run, persist=persist, profile=profile)
    if as_json:
        _print_json(result.rows)
    else:
        for line in result.lines:
            click.echo(line)
    if result.errors:
        raise ShmqError(f"{len(result.errors)} changes failed; first: {result.errors[0]}")
