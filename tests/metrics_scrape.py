"""What the metrics tests share: one scrape of a Prometheus endpoint as ``{(name, labels):
value}``, and the one sample of a name whose labels include the given ones."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def samples(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape_endpoint(address: str) -> Samples:
    """Every sample of one scrape of ``http://address/metrics``."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        return samples(r.read().decode())


def sample(found: Samples, name: str, **labels: str) -> float | None:
    """The one sample ``name`` whose labels include ``labels``; None when there is none."""
    want = set(labels.items())
    hits = [v for (n, ls), v in found.items() if n == name and want <= ls]
    assert len(hits) <= 1, f"{name} {labels}: {len(hits)} samples"
    return hits[0] if hits else None
