"""The dashboard against a broker with ACL on: visitors log in with an ACL account (a wrong
secret is refused with the broker's reason), an ``admin: true`` account may act, any other
account sees the pages read-only and its posts are refused. Through Flask's test client:
what is checked is the server's decisions, which no browser can get around."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request

import pytest

pytest.importorskip("flask", reason="the dashboard extra is not installed")
pytest.importorskip("waitress", reason="the dashboard extra is not installed")

from e2e_helpers import embedded, env, free_port, shmq
from shmq.client.admin.admin import Admin
from shmq.dashboard import create_app

ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: viewer01
    secretKey: viewer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: operator1
    secretKey: operator-secret
    admin: true
"""


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    root = tmp_path_factory.mktemp("dashboard-acl")
    (root / "plain_acl.yml").write_text(ACL)
    conf = {"acl_enable": True, "acl_file": str(root / "plain_acl.yml")}
    with embedded(str(root / "store"), topics={"Guarded": 2}, **conf) as mq:
        yield mq.namesrv


def log_in(client, access_key: str, secret_key: str):
    return client.post("/login?next=/topics", data={"access_key": access_key,
                                                    "secret_key": secret_key})  # fmt: skip


def csrf(page: bytes) -> str:
    return re.search(rb'name="csrf" value="([^"]+)"', page)[1].decode()


def test_acl_on_means_a_login_and_read_only_for_non_admins(namesrv):
    client = create_app(namesrv).test_client()
    first = client.get("/topics")
    assert first.status_code == 302 and first.location.startswith("/login")
    refused = log_in(client, "viewer01", "not-the-secret")
    assert refused.status_code == 200
    assert b"Check signature failed for accessKey=viewer01" in refused.data
    assert log_in(client, "viewer01", "viewer-secret").location == "/topics"
    page = client.get("/topics")
    assert page.status_code == 200 and b'data-topic="Guarded"' in page.data
    assert b'id="read-only"' in page.data and b'id="create-topic"' not in page.data
    form = {"csrf": csrf(page.data), "topic": "ByViewer", "read_queues": 1, "write_queues": 1}
    posted = client.post("/topics", data={**form, "perm": 6})
    assert posted.status_code == 403 and b"viewer01 is read-only" in posted.data


def test_an_admin_account_may_act(namesrv):
    client = create_app(namesrv).test_client()
    assert log_in(client, "operator1", "operator-secret").status_code == 302
    page = client.get("/topics")
    assert b'id="read-only"' not in page.data and b'id="create-topic"' in page.data
    stale = client.post("/topics", data={"csrf": "forged", "topic": "ByAdmin"})
    assert stale.status_code == 400  # another site's form carries no valid token
    done = client.post("/topics", data={"csrf": csrf(page.data), "topic": "ByAdmin",
                                        "read_queues": 2, "write_queues": 2, "perm": 6},
                       follow_redirects=True)  # fmt: skip
    assert b"topic ByAdmin updated on broker-a" in done.data
    with Admin(namesrv, credentials=("operator1", "operator-secret")) as admin:
        assert "ByAdmin" in admin.topic_list()


def test_the_cli_serves_one_account_to_every_visitor_until_sigterm(namesrv, tmp_path):
    """``shmq dashboard --access-key``: no login page, that account's (read-only) view;
    SIGTERM stops it with exit status 0."""
    port = free_port()
    args = [sys.executable, "-m", "shmq_cli.main", "dashboard", "-n", namesrv, "--port",
            str(port), "--access-key", "viewer01"]  # fmt: skip
    proc = subprocess.Popen(args, env={**env(), "SHMQ_SECRET_KEY": "viewer-secret"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert (
            proc.stdout.readline().strip().endswith(f"at http://127.0.0.1:{port} (Ctrl-C stops it)")
        )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/topics", timeout=30) as answer:
            page = answer.read()
        assert b'data-topic="Guarded"' in page and b'id="read-only"' in page
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_the_cli_says_why_when_the_namesrv_does_not_answer():
    done = shmq("dashboard", "-n", f"127.0.0.1:{free_port()}", "--port", "0", timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("error: "), done.stderr
    usage = shmq("dashboard", "--port", "70000", timeout=60)
    assert usage.returncode == 2 and "--port" in usage.stderr
