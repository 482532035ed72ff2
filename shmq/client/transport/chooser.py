"""Which data path a client uses for a broker: shared memory or TCP.

``transport="shm"`` always attaches the broker's segments and reads its store files;
``"tcp"`` always speaks RocketMQ's send and pull codes on the broker's address; ``"auto"``
(the default) asks the broker once for its store info and takes shared memory only when
the broker's host id (boot id and ``/dev/shm``, see ``shmq.ipc.host``) and store directory
are this process's own and its shared-memory layouts are this install's
(``shmq.ipc.layout``), and it runs as this process's user: a client of another user
cannot open the broker's owner-only segments and files, so it is served over TCP (and, with
ACL on, by its account). A broker on another host is therefore never attached through
``/dev/shm`` names that happen to exist here, a broker of another shmq version is reached
over TCP, and a broker that cannot be asked is tried again at the next use instead of
being pinned to one answer. ``"shm"`` refuses a broker whose layouts differ.
"""

from __future__ import annotations

import os
import threading

from shmq.errors import ConfigError
from shmq.ipc.host import host_id, path_id
from shmq.ipc.layout import layout_id
from shmq.remoting.client import RemotingClient
from shmq.remoting.protocol import RequestCode

TRANSPORTS = ("auto", "shm", "tcp")


def check_transport(transport: str) -> str:
    if transport not in TRANSPORTS:
        raise ConfigError(f"transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    return transport


def broker_is_local(info: dict) -> bool:
    """Whether a broker's store info (``GET_STORE_INFO``) describes this host's store, in
    shared-memory layouts this install speaks, kept by this process's user or shared with
    a group it is in (``localClientGroup``)."""
    store_id = info.get("storeId")
    gid = info.get("localClientGid", -1)
    return (
        info.get("hostId") == host_id()
        and (
            info.get("uid", os.geteuid()) == os.geteuid()
            or (gid >= 0 and gid in {os.getegid(), *os.getgroups()})
        )
        and bool(store_id)
        and path_id(info.get("storePathRootDir", "")) == store_id
        and info.get("shmLayout") == layout_id()
    )


class TransportChooser:
    """The transport of each broker address, decided once per address (``auto``)."""

    def __init__(self, client: RemotingClient, transport: str) -> None:
        self.client = client
        self.transport = check_transport(transport)
        self.known: dict[str, bool] = {}  # address -> TCP, once decided (read lock-free)
        self._lock = threading.Lock()

    def tcp(self, address: str) -> bool:
        """True when ``address``'s data path is TCP. ``auto`` raises the ``RemotingError``
        of a broker that cannot be asked (the caller's attempt fails, as a send would)."""
        known = self.known.get(address)
        if known is None:
            if self.transport == "tcp":
                known = True
            elif self.transport == "shm":
                _, info = self.client.invoke_json(address, RequestCode.GET_STORE_INFO)
                theirs = (info or {}).get("shmLayout")
                if theirs != layout_id():
                    raise ConfigError(
                        f"broker {address} uses shared-memory layouts {theirs} and this client "
                        f"{layout_id()} (another shmq version): upgrade both, or use "
                        "transport='tcp' or 'auto'"
                    )
                known = False
            else:
                _, info = self.client.invoke_json(address, RequestCode.GET_STORE_INFO)
                known = not broker_is_local(info or {})
            with self._lock:
                self.known[address] = known
        return known
