"""How a client command connects: ACL credentials and TLS, options shared by ``shmq produce``,
``shmq consume`` and every ``shmq admin`` command.

The options are added once by ``connection_options`` and kept on the click context instead of
being passed to each command's function, so the commands (dozens of admin ones) take no extra
parameters: what opens a client asks ``client_options()`` for its ``credentials=`` and
``tls=``. The secret key comes from ``--secret-key`` or, so that it stays out of the shell's
history and ``ps``, from ``SHMQ_SECRET_KEY``; it is never printed, in help or in errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

_KEPT = "shmq_cli.connection"  # the click context's meta key of the values given
_FILE = click.Path(exists=True, dir_okay=False)


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    ctx.meta.setdefault(_KEPT, {})[param.name] = value


def _option(*decls: str, **attrs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(*decls, expose_value=False, callback=_keep, **attrs)


_OPTIONS = (
    _option("--access-key", envvar="SHMQ_ACCESS_KEY", show_envvar=True, metavar="KEY",
            help="ACL access key: sign every request (brokers with aclEnable=true)."),
    _option("--secret-key", envvar="SHMQ_SECRET_KEY", show_envvar=True, metavar="SECRET",
            help="ACL secret key of --access-key (better given by its environment variable)."),
    _option("--tls", is_flag=True, help="Connect with TLS (any server certificate is taken)."),
    _option("--tls-ca", type=_FILE, metavar="FILE",
            help="Connect with TLS, checking the server's certificate against this CA."),
    _option("--tls-cert", type=_FILE, metavar="FILE",
            help="Connect with TLS, showing this client certificate (mutual TLS)."),
    _option("--tls-key", type=_FILE, metavar="FILE", help="The private key of --tls-cert."),
)  # fmt: skip


def connection_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add the credential and TLS options to the command ``f``."""
    for option in reversed(_OPTIONS):
        f = option(f)
    return f


def client_options() -> dict[str, Any]:
    """The ``credentials=`` and ``tls=`` of the running command's options, for a client's
    constructor; a ``UsageError`` for an access key without its secret, or the reverse,
    or a TLS key without its certificate."""
    from shmq.remoting.security.credentials import Credentials
    from shmq.remoting.security.tls import TlsOptions

    given = click.get_current_context().meta.get(_KEPT, {})
    access_key, secret_key = given.get("access_key"), given.get("secret_key")
    if bool(access_key) != bool(secret_key):
        raise click.UsageError(
            "--access-key and --secret-key (or SHMQ_ACCESS_KEY and SHMQ_SECRET_KEY) go together"
        )
    ca, cert, key = given.get("tls_ca"), given.get("tls_cert"), given.get("tls_key")
    if key and not cert:
        raise click.UsageError("--tls-key needs --tls-cert")
    tls = None
    if given.get("tls") or ca or cert:
        tls = TlsOptions(ca_file=ca, cert_file=cert, key_file=key)
    credentials = Credentials(access_key, secret_key) if access_key else None
    return {"credentials": credentials, "tls": tls}
