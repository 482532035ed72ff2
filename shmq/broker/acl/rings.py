"""ACL for local producers' rings: a ring writes only the topics its account may publish.

A producer on the broker's host sends through its shared-memory ring, not requests, so the
one check of every request (``validator``) cannot see its messages. With ACL on, its
registration is a signed request like any other; the supervisor writes the account into
the ring's registry line (``ring_account``: 0 when the account may publish anything, as an
admin account, or a peer whose address the file whitelists, may), and the writer refuses a
record for a topic that account may not publish with ``REASON_ACL`` (``RingAcl``), by the
same rules as SEND_MESSAGE's check: PUB on the topic, SUB on the group of a ``%RETRY%`` topic,
the account's default permission for what it does not list, the trace topic always.
"""

from __future__ import annotations

import numpy as np

from shmq.broker.acl.address import canonical
from shmq.broker.acl.permission import PUB, SUB
from shmq.broker.acl.plain_config import AclConfig, PlainAccessConfig
from shmq.broker.acl.plain_file import PlainAclFile
from shmq.broker.acl.validator import TRACE_TOPIC, AclException, PlainAcl, check_resource
from shmq.codec.ring_append import TopicIndex
from shmq.ipc import registry as rg
from shmq.ipc.ring import REASON_ACL
from shmq.names import RETRY_GROUP_TOPIC_PREFIX
from shmq.remoting.security.signature import ACCESS_KEY


def ring_account(acl: PlainAcl, ext_fields: dict[str, str], host: str) -> int:
    """The ACCOUNT word of a ring registered by a request with ``ext_fields`` from ``host``
    (the request passed ``acl``'s check already)."""
    config = acl.file.current()
    host = canonical(host)
    key = ext_fields.get(ACCESS_KEY)
    if not key or any(p.matches(host) for p in config.global_white):
        return 0
    account = _account(acl, config, key)
    if account is None or account.admin or account.white.matches(host):
        return 0 if account is not None else rg.account_id(key)
    return rg.account_id(key)


def _account(acl: PlainAcl, config: AclConfig, key: str) -> PlainAccessConfig | None:
    if acl.inner is not None and key == acl.inner.access_key:
        return acl.inner
    return config.accounts.get(key)


def may_publish(account: PlainAccessConfig | None, topic: str) -> bool:
    """Whether ``account`` (None: an account the file no longer has) may send to
    ``topic``, as SEND_MESSAGE's check decides."""
    if account is None:
        return False
    if account.admin or topic == TRACE_TOPIC:
        return True
    needed = SUB if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else PUB
    try:
        check_resource(account, topic, needed)
    except AclException:
        return False
    return True


class RingAcl:
    """The writer's side: the topic index's reasons as each account's rings see them."""

    def __init__(self, file: PlainAclFile) -> None:
        self.file = file
        self._config: AclConfig | None = None
        self._by_id: dict[int, PlainAccessConfig] = {}
        self._infos: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # id -> (source, info)

    def _accounts(self) -> dict[int, PlainAccessConfig]:
        config = self.file.current()
        if config is not self._config:  # the file changed: every account's view too
            self._config = config
            self._by_id = {rg.account_id(k): a for k, a in config.accounts.items()}
            self._infos.clear()
        return self._by_id

    def may_publish(self, account: int, topic: bytes) -> bool:
        return may_publish(self._accounts().get(account), topic.decode("utf-8", "replace"))

    def info(self, account: int, index: TopicIndex) -> np.ndarray:
        """``index.info`` for rings of ``account``: the topics it may not publish refused
        with ``REASON_ACL``. Rebuilt when the index or the file changed."""
        accounts = self._accounts()
        cached = self._infos.get(account)
        if cached is not None and cached[0] is index.info:
            return cached[1]
        owner = accounts.get(account)
        info = index.info.copy()
        for name, t in index.ids.items():
            if not may_publish(owner, name.decode("utf-8", "replace")):
                info[t, 0] = REASON_ACL
        self._infos[account] = (index.info, info)
        return info
