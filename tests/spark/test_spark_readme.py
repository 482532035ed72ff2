"""The README's Spark snippet runs as written, in the test session (format "shmq" found
without registration), against the session's broker and store."""

from __future__ import annotations

import pytest
from test_readme import local, python_snippets

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_the_readme_spark_snippet_runs(spark, broker, make_topic, tmp_path):
    make_topic("Orders", 2)
    [snippet] = [s for s in python_snippets() if "spark" in s]
    code = local(snippet, broker.namesrv, tmp_path).replace("/var/shmq/store", broker.store)
    scope = {"spark": spark}
    exec(compile(code, "README.md", "exec"), scope)
    assert scope["stream"].isStreaming
    assert scope["df"].columns[:3] == ["topic", "queueId", "queueOffset"]
