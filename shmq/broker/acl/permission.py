"""RocketMQ's ACL ``Permission``: the permission words of ``plain_acl.yml``, their bits, the
check of a needed permission against an owned one, and the request codes only an admin
account may send."""

from __future__ import annotations

from shmq.remoting.codes import RequestCode

DENY, ANY, PUB, SUB = 1, 2, 4, 8

_WORDS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}

# RocketMQ's ADMIN_CODE, plus UPDATE_GLOBAL_WHITE_ADDRS_CONFIG and
# GET_BROKER_CLUSTER_ACL_CONFIG: RocketMQ lets any account send those two, so any account
# could open the broker to every address; shmq asks for an admin account there too.
ADMIN_CODES = frozenset((
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG,
    RequestCode.DELETE_TOPIC_IN_BROKER, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode.DELETE_SUBSCRIPTIONGROUP, RequestCode.UPDATE_AND_CREATE_STATIC_TOPIC,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG,
))  # fmt: skip


def parse_perm(word: object) -> int:
    """A permission word's bits (``parsePermFromString``): anything unknown, or none, is
    DENY, so a typo never grants more."""
    if not isinstance(word, str):
        return DENY
    return _WORDS.get(word.strip(), DENY)


def is_valid_word(word: str) -> bool:
    """Whether ``word`` is one of RocketMQ's permission words (what the admin codes accept)."""
    return word.strip() in _WORDS


def check_perm(needed: int, owned: int) -> bool:
    """``checkPermission``: DENY owned refuses all; ANY needs PUB or SUB; else a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)
