"""The gRPC proxy's account with the broker (what RocketMQ's proxy signs with,
``innerClientAuthenticationCredentials``); the data server signs what it asks the control
server for (the topic and group tables, the live config) with it too.

The proxy checks its clients itself (``shmq.proxy.authorization``) and then asks the
broker on their behalf; those requests must pass the broker's ACL too. Rather than a secret
in a config file, the supervisor makes a fresh admin account for each start and hands it to
the proxy process it spawns (in the pickled spawn arguments, never on a command line or in
a file); it exists only in the two processes' memory, so nothing can leak it from disk and
no other client can sign as the proxy.
"""

from __future__ import annotations

import secrets

from shmq.broker.acl.plain_config import PlainAccessConfig

PREFIX = "shmq-proxy-"


def inner_account() -> PlainAccessConfig:
    """A new random admin account."""
    return PlainAccessConfig(PREFIX + secrets.token_hex(8), secrets.token_urlsafe(32), admin=True)
