"""``shmq``: the entry point. Commands live in their own modules and import numba-using code
only when they run, so ``shmq --help`` starts fast."""

from __future__ import annotations

import logging

import click
from shmq_cli.store_demo import store_demo

from shmq import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="shmq")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """shmq: a RocketMQ-compatible message broker for one host, over shared memory."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


cli.add_command(store_demo)
