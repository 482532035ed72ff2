"""The gRPC proxy over TLS: a broker that enforces TLS serves its MessagingService with its
certificate, to a client with ``grpc.ssl_channel_credentials``, and a plaintext client is
refused (the broker is a real process of ``e2e_helpers.cluster``)."""

from __future__ import annotations

import socket

import grpc
import pytest
from grpc_client import Client, message
from waiting import wait_for

from e2e_helpers import cluster, free_port, tls_certs
from shmq.proxy.v2 import definition_pb2 as pb
from shmq.proxy.v2 import service_pb2 as spb
from shmq.remoting.security.tls import TlsOptions

TOPIC = "TlsGrpc"


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_an_enforcing_broker_serves_grpc_over_tls_only(tmp_path):
    cert, key = tls_certs(str(tmp_path))
    port = free_port()
    conf = {"tlsServerMode": "enforcing", "tlsServerCertPath": cert, "tlsServerKeyPath": key,
            "proxyEnable": "true", "grpcServerPort": port}  # fmt: skip
    namesrv = ("--tls-server-cert-path", cert, "--tls-server-key-path", key)
    with cluster(tmp_path, namesrv, tls=TlsOptions(ca_file=cert), **conf) as c:
        c.create_topic(TOPIC, 2)
        # the broker registers (the cluster's start waits for that) before its proxy serves
        wait_for(lambda: port_open(port), what="the gRPC port listening")
        with open(cert, "rb") as f:
            client = Client(f"127.0.0.1:{port}", root_certificates=f.read())
        try:
            route = client.call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)))
            assert route.status.code == pb.OK and len(route.message_queues) == 2
            client.publish(TOPIC)
            sent = client.send(message(TOPIC, b"over TLS"))
            assert sent.status.code == pb.OK, sent.status
        finally:
            client.close()
        plain = Client(f"127.0.0.1:{port}")
        try:
            with pytest.raises(grpc.RpcError) as refused:
                plain.call("QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                           timeout=5)  # fmt: skip
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        finally:
            plain.close()
