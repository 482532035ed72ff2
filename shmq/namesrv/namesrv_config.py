"""The NameServer's settings as mqadmin reads and changes them (``getNamesrvConfig``,
``updateNamesrvConfig``: GET_NAMESRV_CONFIG / UPDATE_NAMESRV_CONFIG), under RocketMQ's
``NamesrvConfig`` names where it has one.

RocketMQ takes any key of its config objects and writes them all to ``configStorePath``,
a file it does not read at the next start unless told to. shmq's namesrv has no config
file (its settings are ``shmq namesrv`` options), so an update acts on the running namesrv
only, and only where it can act at once: ``orderMessageEnable`` (read on every route
request). Any other key it lists is read when the namesrv starts, and an update of it is
refused by name, as is a key it does not know; the black list is RocketMQ's
(``configBlackList``, ``configStorePath``, ``kvConfigPath``).
"""

from __future__ import annotations

from typing import Protocol

from shmq.errors import ConfigError
from shmq.java_properties import escape, parse_properties
from shmq.namesrv.controller import Controller
from shmq.namesrv.kv_config import KVConfigManager

LIVE_KEYS = ("orderMessageEnable",)
BLACK_LIST = ("configBlackList", "configStorePath", "kvConfigPath")
BLACK_LIST_REMARK = "Can not update config in black list."


class NamesrvSettings(Protocol):
    """Where the settings live: the running ``NameServer``, which answers the two requests
    with this module (so this module names what it reads instead of importing the server)."""

    kv_config: KVConfigManager
    controller: Controller | None
    order_message_enable: bool  # the one setting an update changes
    scan_interval_ms: int
    broker_expire_ms: int

    @property
    def port(self) -> int: ...


def config_text(ns: NamesrvSettings) -> str:
    """Every setting as ``key=value`` lines (sorted)."""
    controller = ns.controller
    values = {
        "listenPort": ns.port,
        "kvConfigPath": ns.kv_config.path or "",
        "orderMessageEnable": ns.order_message_enable,
        "scanNotActiveBrokerInterval": ns.scan_interval_ms,
        "brokerChannelExpiredTime": ns.broker_expire_ms,  # RocketMQ's is a constant
        "enableControllerInNamesrv": controller is not None,
    }
    if controller is not None:
        values["controllerHeartbeatTimeoutMs"] = controller.heartbeat_timeout_ms
    return "".join(f"{k}={escape(_text(v))}\n" for k, v in sorted(values.items()))


def update(ns: NamesrvSettings, text: str) -> list[str]:
    """Apply the keys of properties ``text`` to ``ns``; the black-listed keys (nothing
    changed then: the caller refuses); ``ConfigError`` naming an unknown key, a key read at
    start, or a bad value."""
    values = parse_properties(text)
    black_listed = sorted(k for k in values if k in BLACK_LIST)
    if black_listed:
        return black_listed
    known = set(parse_properties(config_text(ns)))
    unknown = sorted(k for k in values if k not in known)
    if unknown:
        raise ConfigError(f"unknown namesrv config key {', '.join(unknown)}")
    at_start = sorted(k for k in values if k not in LIVE_KEYS)
    if at_start:
        raise ConfigError(f"{', '.join(at_start)} is read when the namesrv starts: restart it "
                          "with the shmq namesrv option")  # fmt: skip
    if "orderMessageEnable" not in values:
        return []  # nothing to change (an empty body: RocketMQ answers SUCCESS too)
    flag = values["orderMessageEnable"].strip().lower()
    if flag not in ("true", "false"):
        raise ConfigError(f"orderMessageEnable = {values['orderMessageEnable']!r} is not a "
                          "valid bool")  # fmt: skip
    ns.order_message_enable = flag == "true"
    return []


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
