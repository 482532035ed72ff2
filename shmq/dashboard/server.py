"""Serving the dashboard: waitress (a production WSGI server, pure Python) on one port, run
in a thread so that ``shmq dashboard`` and the tests start and stop it the same way."""

from __future__ import annotations

import threading
from types import TracebackType

from flask import Flask
from waitress.server import create_server

from shmq.errors import ShmqError


class DashboardServer:
    """Serve ``app`` on ``host:port`` (port 0: any free one; ``url`` says which) from
    ``start()`` until ``stop()``."""

    def __init__(self, app: Flask, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.app = app
        try:
            self._server = create_server(app, host=host, port=port, threads=4,
                                         ident="shmq-dashboard")  # fmt: skip
        except OSError as exc:
            raise ShmqError(f"the dashboard cannot listen on {host}:{port}: {exc}") from None
        self.host, self.port = host, self._server.effective_port
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> DashboardServer:
        self._thread = threading.Thread(target=self._server.run, name="shmq-dashboard",
                                        daemon=True)  # fmt: skip
        self._thread.start()
        return self

    def wait(self) -> None:
        """Until the server stops (``stop`` from another thread)."""
        if self._thread is not None:
            while self._thread.is_alive():
                self._thread.join(0.5)  # a timed join: Ctrl-C still reaches the main thread

    def stop(self) -> None:
        """Close the listening socket and the connections; the serving thread ends."""
        self._server.close()
        if self._thread is not None:
            self._thread.join(10)
        live = self.app.extensions.get("shmq_live")
        if live is not None:
            live.close()

    def __enter__(self) -> DashboardServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
