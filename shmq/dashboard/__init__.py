"""``shmq dashboard``: a web view and console of a cluster, in the spirit of RocketMQ Dashboard.

Every page is built from ``shmq.client.admin.Admin`` calls and the brokers' runtime numbers
(the same requests ``shmq admin`` and ``shmq top`` send), never from the store's files, so it
shows a broker on another host as well as one here. ``create_app`` builds the Flask app;
``DashboardServer`` serves it with waitress (what ``shmq dashboard`` runs, and the tests).
"""

from __future__ import annotations

from shmq.dashboard.app import create_app
from shmq.dashboard.server import DashboardServer

__all__ = ["DashboardServer", "create_app"]
