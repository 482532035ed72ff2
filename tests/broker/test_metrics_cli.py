"""``shmq start --metrics``: the daemon serves its metrics on the configured port and says
where; ``shmq stop`` stops the endpoint's process with the rest."""

from __future__ import annotations

import os
import socket
import urllib.request

import pytest

from e2e_helpers import free_port, shm_entries, shmq


def test_start_metrics_serves_the_endpoint_until_stop(tmp_path):
    before = shm_entries()
    store = str(tmp_path / "store")
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"metricsPromExporterPort={port}\n")
    started = shmq("start", "--daemon", "--metrics", "-c", str(conf), "--store", store,
                   "--namesrv-port", str(free_port()), "--broker-port", str(free_port()),
                   "--mapped-file-size", str(8 << 20))  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert 'rocketmq_broker_permission{cluster="DefaultCluster"' in text
        with open(os.path.join(store, "shmq.log")) as log:
            assert f"metrics for Prometheus: http://127.0.0.1:{port}/metrics" in log.read()
    finally:
        stopped = shmq("stop", "--store", store)
    assert stopped.returncode == 0, stopped.stderr
    with socket.socket() as s, pytest.raises(ConnectionRefusedError):
        s.connect(("127.0.0.1", port))
    assert shm_entries() - before == set()
