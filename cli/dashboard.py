"""``shmq dashboard``: serve the web dashboard (``shmq.dashboard``) of the cluster a namesrv
knows, on loopback unless ``--host`` says otherwise, until Ctrl-C or SIGTERM.

Without an account and with ACL on (a broker refuses unsigned requests), visitors log in with
their ACL account; ``--access-key`` / ``--secret-key`` give every visitor that account
instead. Accounts without ``admin: true`` see a read-only dashboard.
"""

from __future__ import annotations

import signal
from typing import Any

import click

from shmq_cli.connection import client_options, connection_options


@click.command("dashboard")
@click.option("-n", "--namesrv", default="127.0.0.1:9876", show_default=True,
              help="The namesrv(s) of the cluster, ';'-separated.")  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0: every interface).")  # fmt: skip
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0: any free one).")  # fmt: skip
@click.option("--login/--no-login", default=None,
              help="Visitors log in with an ACL account [default: when ACL is on].")  # fmt: skip
@connection_options
def dashboard(namesrv: str, host: str, port: int, login: bool | None) -> None:
    """A web dashboard: cluster, topics, consumer groups, producers, messages, live charts."""
    try:
        from shmq.dashboard import DashboardServer, create_app
    except ImportError as exc:
        raise click.ClickException(
            f"the dashboard needs its extra: pip install 'shmq[dashboard]' ({exc})"
        ) from None
    options = client_options()
    if options["credentials"] is not None and login:
        raise click.UsageError("--login and --access-key exclude each other")
    app = create_app(namesrv, login=login, **options)
    server = DashboardServer(app, host, port)
    click.echo(f"shmq dashboard of namesrv {namesrv} at {server.url} (Ctrl-C stops it)")

    def stop(_signum: int, _frame: Any) -> None:
        server.stop()

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        server.start().wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
