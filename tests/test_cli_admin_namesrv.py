"""``shmq admin``'s namesrv commands (mqadmin updateKvConfig, deleteKvConfig, updateOrderConf,
wipeWritePerm, addWritePerm, plus get-kv-config, kv-list and topics-by-cluster) against a
real NameServer with a registered (address-only) broker, and ``shmq namesrv``'s KV config
options."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from e2e_helpers import free_port
from shmq.namesrv.server import NameServer
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode
from shmq_cli.main import cli


@pytest.fixture
def ns(tmp_path):
    server = NameServer(
        port=0, kv_config_path=str(tmp_path / "kvConfig.json"), order_message_enable=True
    )
    server.start()
    with RemotingClient(default_timeout=3.0) as broker:  # open: its routes stay
        ext = {"brokerName": "broker-a", "brokerAddr": "127.0.0.1:10911", "brokerId": 0,
               "clusterName": "DefaultCluster", "haServerAddr": ""}  # fmt: skip
        table = {t: {"topicName": t, "perm": 6} for t in ("Orders", "Audit")}
        body = {"topicConfigSerializeWrapper": {"topicConfigTable": table}}
        broker.invoke_json(server.address, RequestCode.REGISTER_BROKER, ext, body)
        yield server
    server.stop()


def admin(ns, *args: str, code: int = 0):
    result = CliRunner().invoke(cli, ["admin", *args, "-n", ns.address])
    assert result.exit_code == code, (result.output, result.stderr, result.exception)
    return result


def test_kv_config_commands(ns):
    out = admin(ns, "update-kv-config", "-s", "app", "-k", "color", "-v", "blue").stdout
    assert out == "create or update kv config to namespace success.\n"
    assert ns.kv_config.get("app", "color") == "blue"
    assert admin(ns, "get-kv-config", "-s", "app", "-k", "color").stdout == "blue\n"
    got = json.loads(admin(ns, "get-kv-config", "-s", "app", "-k", "color", "--json").stdout)
    assert got == {"namespace": "app", "key": "color", "value": "blue"}
    assert json.loads(admin(ns, "kv-list", "-s", "app", "--json").stdout) == {"color": "blue"}
    assert "color" in admin(ns, "kv-list", "-s", "app").stdout
    out = admin(ns, "delete-kv-config", "-s", "app", "-k", "color").stdout
    assert out == "delete kv config from namespace success.\n"
    missing = admin(ns, "get-kv-config", "-s", "app", "-k", "color", code=1)
    assert missing.stderr == "error: No config item, Namespace: app Key: color\n"
    admin(ns, "update-kv-config", "-s", "app", "-k", "color", code=2)  # -v is required


def test_update_order_conf_put_get_delete(ns):
    out = admin(ns, "update-order-conf", "-t", "Orders", "-m", "put", "-v", "broker-a:2").stdout
    assert out == "update orderConf success. topic=[Orders], orderConf=[broker-a:2]\n"
    route = json.loads(admin(ns, "topic-route", "-t", "Orders", "--json").stdout)
    assert route["orderTopicConf"] == "broker-a:2"
    out = admin(ns, "update-order-conf", "-t", "Orders", "-m", "get").stdout
    assert out == "get orderConf success. topic=[Orders], orderConf=[broker-a:2]\n"
    out = admin(ns, "update-order-conf", "-t", "Orders", "-m", "delete", "--json").stdout
    assert json.loads(out) == {"topic": "Orders", "orderConf": None}
    got = admin(ns, "update-order-conf", "-t", "Orders", "-m", "get", "--json", code=1)
    assert got.stderr == "error: No config item, Namespace: ORDER_TOPIC_CONFIG Key: Orders\n"

    bad = admin(ns, "update-order-conf", "-t", "Orders", "-m", "put", "-v", "broker-a", code=1)
    assert bad.stderr.startswith("error: orderTopicConf 'broker-a': entry 'broker-a' is not")
    assert len(bad.stderr.splitlines()) == 1
    usage = admin(ns, "update-order-conf", "-t", "Orders", "-m", "put", code=2)
    assert "please set orderConf with option -v." in usage.stderr


def test_topics_by_cluster_and_write_perms(ns):
    assert admin(ns, "topics-by-cluster", "-c", "DefaultCluster").stdout == "Audit\nOrders\n"
    assert json.loads(admin(ns, "topics-by-cluster", "-c", "Nope", "--json").stdout) == []
    out = admin(ns, "wipe-write-perm", "-b", "broker-a").stdout
    assert out == f"wipe write perm of broker[broker-a] in name server[{ns.address}] OK, 2\n"
    route = json.loads(admin(ns, "topic-route", "-t", "Orders", "--json").stdout)
    assert route["queueDatas"][0]["perm"] == 4
    counts = json.loads(admin(ns, "add-write-perm", "-b", "broker-a", "--json").stdout)
    assert counts == {ns.address: 2}
    assert ns.routes.pick_topic_route("Orders")["queueDatas"][0]["perm"] == 6


def test_a_namesrv_that_is_down_is_one_error_line(ns):
    down = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["admin", "wipe-write-perm", "-b", "broker-a",
                                      "-n", f"{ns.address};{down}"])  # fmt: skip
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("error: WIPE_WRITE_PERM_OF_BROKER(205) failed on namesrv " + down)
    assert line.endswith(f"(taken by: {ns.address})")


def test_namesrv_refuses_a_corrupt_kv_config_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text("{torn")
    args = ["namesrv", "--port", "0", "--kv-config-path", str(path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]  # after the warning json_file logs
    assert last.startswith(f"error: cannot load {path} or its .bak")


def test_namesrv_config_commands(ns):
    (config,) = json.loads(admin(ns, "get-namesrv-config", "--json").stdout).values()
    assert config["orderMessageEnable"] == "true" and config["listenPort"] == str(ns.port)
    assert "kvConfigPath" in admin(ns, "get-namesrv-config").stdout
    out = admin(ns, "update-namesrv-config", "-k", "orderMessageEnable", "-v", "false").stdout
    assert out == f"update name server config success![{ns.address}]\norderMessageEnable : false\n"
    assert ns.order_message_enable is False
    refused = admin(ns, "update-namesrv-config", "-k", "listenPort", "-v", "1", code=1)
    assert "listenPort is read when the namesrv starts" in refused.stderr
