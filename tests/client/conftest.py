"""One namesrv + broker for the client tests of a module (each test uses its own topics and
groups)."""

from __future__ import annotations

import pytest

from e2e_helpers import cluster, shm_entries


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    before = shm_entries()
    # a failed message comes back from the retry topic after a second, not 10 s
    levels = " ".join(["1s"] * 18)
    with cluster(tmp_path_factory.mktemp("cluster"), defaultTopicQueueNums=4,
                 messageDelayLevel=levels) as c:  # fmt: skip
        yield c
    assert shm_entries() - before == set()
