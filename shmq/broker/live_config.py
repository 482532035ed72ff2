"""The broker's config as it is now, one object every part of the supervisor process shares.

``BrokerConfig`` is frozen: UPDATE_BROKER_CONFIG (``processors.admin``) and a controller's
promotion (``supervisor``) replace it instead of editing it. Whoever must see such a change
(the processors, the namesrv registration, the slave's synchronisation, the supervisor when
it restarts an agent) holds this object, not a config, and reads ``current`` at use.
"""

from __future__ import annotations

from collections.abc import Callable

from shmq.broker.config.broker_config import BrokerConfig


class LiveConfig:
    """``current``: the broker's config now; assigned, never edited. ``on_change`` (the
    supervisor's, once its shared memory exists) is called after each assignment: the data
    server, another process, learns of it through a shared word."""

    def __init__(self, config: BrokerConfig) -> None:
        self._current = config
        self.on_change: Callable[[], None] | None = None

    @property
    def current(self) -> BrokerConfig:
        return self._current

    @current.setter
    def current(self, config: BrokerConfig) -> None:
        self._current = config
        if self.on_change is not None:
            self.on_change()
