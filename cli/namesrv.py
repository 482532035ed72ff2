"""``shmq namesrv``: run a NameServer in the foreground (RocketMQ's ``mqnamesrv``).

Prints ``namesrv listening on HOST:PORT`` once it accepts connections (scripts and tests wait
for that line) and stops cleanly, exit status 0, on SIGTERM or SIGINT. Imports nothing
numba-related (see ``shmq_cli.main``).
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

import click

from shmq.errors import ConfigError
from shmq.namesrv.controller import DEFAULT_STORE_PATH, HEARTBEAT_TIMEOUT_MS
from shmq.namesrv.kv_config import DEFAULT_KV_CONFIG_PATH
from shmq.namesrv.metrics import DEFAULT_METRICS_PORT
from shmq.namesrv.routes import BROKER_EXPIRE_MS
from shmq.namesrv.server import DEFAULT_PORT, SCAN_INTERVAL_MS, NameServer
from shmq.remoting.security.tls_server import CLIENT_AUTH, MODES, PERMISSIVE, TlsServerConfig

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@click.command("namesrv")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
    help="TCP port (0: any free port).",
)  # fmt: skip
@click.option(
    "--scan-interval-ms", default=SCAN_INTERVAL_MS, show_default=True, type=click.IntRange(1),
    help="How often to look for brokers that stopped registering.",
)  # fmt: skip
@click.option(
    "--broker-expire-ms", default=BROKER_EXPIRE_MS, show_default=True, type=click.IntRange(1),
    help="A broker silent for this long loses its routes.",
)  # fmt: skip
@click.option(
    "--enable-controller-in-namesrv", "enable_controller", is_flag=True,
    help="Run the controller: elect a new master when a master's heartbeats stop.",
)  # fmt: skip
@click.option(
    "--controller-heartbeat-timeout-ms", default=HEARTBEAT_TIMEOUT_MS, show_default=True,
    type=click.IntRange(1), help="A master silent for this long is replaced (controller).",
)  # fmt: skip
@click.option(
    "--controller-store-path", default=DEFAULT_STORE_PATH, show_default=True,
    type=click.Path(file_okay=False),
    help="Where the controller keeps each broker group's master and epochs (controller.json).",
)  # fmt: skip
@click.option(
    "--kv-config-path", default=DEFAULT_KV_CONFIG_PATH, show_default=True,
    type=click.Path(dir_okay=False),
    help="The KV config file (kvConfigPath): mqadmin updateKvConfig / updateOrderConf entries.",
)  # fmt: skip
@click.option(
    "--order-message-enable", is_flag=True,
    help="Hand out ORDER_TOPIC_CONFIG entries as routes' orderTopicConf (orderMessageEnable).",
)  # fmt: skip
@click.option(
    "--tls-server-mode", type=click.Choice(MODES, case_sensitive=False), default=PERMISSIVE,
    show_default=True,
    help="tls.server.mode: plain TCP only, TLS and plain TCP on one port, or TLS only.",
)  # fmt: skip
@click.option("--tls-server-cert-path", default="", help="tls.server.certPath (PEM).")
@click.option("--tls-server-key-path", default="", help="tls.server.keyPath (PEM).")
@click.option("--tls-server-key-password", default="", help="tls.server.keyPassword.")
@click.option(
    "--tls-server-need-client-auth", type=click.Choice(tuple(CLIENT_AUTH), case_sensitive=False),
    default="none", show_default=True,
    help="tls.server.need.client.auth: ask for a client certificate (checked against "
         "--tls-server-trust-cert-path).",
)  # fmt: skip
@click.option("--tls-server-trust-cert-path", default="", help="tls.server.trustCertPath (PEM).")
@click.option(
    "--tls-test-mode-enable/--no-tls-test-mode-enable", default=True, show_default=True,
    help="tls.test.mode.enable: without a certificate, serve TLS with a self-signed one.",
)  # fmt: skip
@click.option(
    "--tls-config-file", default="", type=click.Path(dir_okay=False),
    help="tls.config.file: a properties file of tls.server.* values over the options.",
)  # fmt: skip
@click.option(
    "--metrics-port", type=click.IntRange(0, 65535), default=None,
    help=f"Serve Prometheus metrics on this port (0: any free one; "
         f"{DEFAULT_METRICS_PORT} is the usual); off when not given.",
)  # fmt: skip
def namesrv(
    host: str, port: int, scan_interval_ms: int, broker_expire_ms: int, enable_controller: bool,
    controller_heartbeat_timeout_ms: int, controller_store_path: str, kv_config_path: str,
    order_message_enable: bool, tls_server_mode: str, tls_server_cert_path: str,
    tls_server_key_path: str, tls_server_key_password: str, tls_server_need_client_auth: str,
    tls_server_trust_cert_path: str, tls_test_mode_enable: bool, tls_config_file: str,
    metrics_port: int | None,
) -> None:  # fmt: skip
    """Run a NameServer: brokers register here, clients look up topic routes."""
    try:
        tls = TlsServerConfig(
            mode=tls_server_mode, cert_path=tls_server_cert_path, key_path=tls_server_key_path,
            key_password=tls_server_key_password, need_client_auth=tls_server_need_client_auth,
            trust_cert_path=tls_server_trust_cert_path, test_mode=tls_test_mode_enable,
        )  # fmt: skip
        if tls_config_file:
            tls = tls.with_file(tls_config_file)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    server = NameServer(
        host, port, scan_interval_ms=scan_interval_ms, broker_expire_ms=broker_expire_ms,
        enable_controller=enable_controller,
        controller_heartbeat_timeout_ms=controller_heartbeat_timeout_ms,
        controller_store_path=controller_store_path, kv_config_path=kv_config_path,
        order_message_enable=order_message_enable, tls=tls, metrics_port=metrics_port,
    )  # fmt: skip
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in _STOP_SIGNALS}
    try:
        server.start()
        click.echo(f"namesrv listening on {server.address}")
        if server.metrics_address:
            click.echo(f"namesrv metrics on http://{server.metrics_address}/metrics")
        sys.stdout.flush()
        stop.wait()
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
