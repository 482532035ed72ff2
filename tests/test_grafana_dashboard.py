"""The Grafana dashboard shipped in ``docs/grafana/shmq-broker.json``: valid dashboard JSON
(rows and panels laid out on the 24-column grid, each panel's targets with a PromQL
``expr``), and every metric its queries name is one a real broker's endpoint exposes, so a
renamed metric breaks this test rather than a panel."""

from __future__ import annotations

import json
import os
import re
import urllib.request

import pytest

from e2e_helpers import ROOT, embedded

DASHBOARD = os.path.join(ROOT, "docs", "grafana", "shmq-broker.json")
METRIC = re.compile(r"\b((?:rocketmq|shmq)_[a-zA-Z0-9_]+)")
# what the issue asks a panel for, by the metric that shows it
WANTED = {
    "rocketmq_messages_in_total", "rocketmq_messages_out_total", "rocketmq_throughput_in_total",
    "rocketmq_message_size_bucket", "rocketmq_consumer_lag_messages", "rocketmq_storage_size",
    "rocketmq_storage_flush_behind_bytes", "rocketmq_storage_dispatch_behind_bytes",
    "shmq_agent_cpu_seconds_total", "shmq_ring_used_bytes", "shmq_rings_fenced",
    "shmq_disk_used_ratio", "shmq_ha_slave_lag_bytes",
}  # fmt: skip


@pytest.fixture(scope="module")
def dashboard() -> dict:
    with open(DASHBOARD, encoding="utf-8") as f:
        return json.load(f)


def queries(dashboard: dict) -> list[str]:
    """Every PromQL text of the dashboard: the panels' targets and the variables' queries."""
    out = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            out.append(var["query"]["query"])
    return out


@pytest.fixture(scope="module")
def exposed(tmp_path_factory) -> set[str]:
    """The series names a real broker's endpoint exposes (from its ``# TYPE`` lines: a
    family is listed even before it has samples, e.g. HA lag without a slave)."""
    root = str(tmp_path_factory.mktemp("grafana") / "store")
    conf = {"metrics_exporter_type": "PROM", "metrics_prom_exporter_port": 0}
    with embedded(root, **conf) as mq:
        url = f"http://{mq.broker.metrics.address}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names |= {name + s for s in ("_bucket", "_count", "_sum")} if kind == "histogram" \
                else {name}  # fmt: skip
    return names


def test_it_is_a_grafana_dashboard(dashboard):
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "cluster", "broker", "topic", "group"} <= variables
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        mine = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                for y in range(pos["y"], pos["y"] + pos["h"])}  # fmt: skip
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat"} and panel["title"], panel
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]
        for target in panel["targets"]:
            expr = target["expr"]
            assert METRIC.search(expr), (panel["title"], expr)
            for opening, closing in ("()", "{}", "[]"):
                assert expr.count(opening) == expr.count(closing), (panel["title"], expr)


def test_every_metric_it_queries_is_exposed(dashboard, exposed):
    used = {name for q in queries(dashboard) for name in METRIC.findall(q)}
    assert used >= WANTED, f"no panel for {sorted(WANTED - used)}"
    assert used <= exposed, f"not exposed by the broker: {sorted(used - exposed)}"
