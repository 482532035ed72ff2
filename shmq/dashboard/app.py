"""The dashboard's Flask app: pages rendered on the server from ``Admin`` calls, forms for the
actions (each a POST answered with a redirect and a one-line outcome), and ``/api/live``,
the JSON the live charts poll.

Pages: the cluster (brokers, roles, rates, disk, live chart), topics (queues and offsets,
route, groups consuming; create, update, delete, send a test message), consumer groups
(lag per queue, rate, members; reset offsets, skip the backlog, resend from the DLQ),
producers (a group's connections) and messages (by key, id or time; body, properties and
trace timeline). Every request to the cluster is signed with the viewer's account
(``access``); actions need an admin one. Forms carry a per-session token so that another
site's page cannot make a browser post to the dashboard.
"""

from __future__ import annotations

import base64
import collections
import datetime as dt
import secrets
import time
from collections.abc import Callable
from typing import Any

from flask import (
    Flask,
    abort,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.wrappers import Response

from shmq.client.admin.admin import Admin
from shmq.dashboard.access import Account, LoginError, Sessions, acl_enabled, check_account
from shmq.dashboard.live import LiveRates
from shmq.errors import NoRouteError, ResponseError, ShmqError
from shmq.names import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, is_system_topic
from shmq.remoting.security.credentials import Credentials
from shmq.remoting.security.tls import TlsOptions

TEST_PRODUCER_GROUP = "shmq-dashboard"  # the producer group of "send a test message"
PUBLIC_ENDPOINTS = frozenset({"login", "static"})


def create_app(
    namesrv: str,
    *,
    credentials: Credentials | None = None,
    tls: TlsOptions | None = None,
    login: bool | None = None,
) -> Flask:
    """The dashboard of the cluster the namesrv(s) ``namesrv`` know. ``credentials``: one
    ACL account for every visitor (checked now: ``LoginError`` when refused); otherwise
    ``login`` says whether visitors log in with their own account, by default when a
    registered broker refuses unsigned requests (ACL on)."""
    fixed: Account | None = None
    if credentials is not None:
        fixed = check_account(namesrv, credentials, tls)
    elif not (acl_enabled(namesrv, tls) if login is None else login):
        fixed = Account(None, admin=True)
    app = Flask(__name__)
    app.secret_key = secrets.token_bytes(32)  # sessions end with the process
    app.config.update(SESSION_COOKIE_SAMESITE="Strict", SESSION_COOKIE_HTTPONLY=True)
    sessions = Sessions()
    live = LiveRates()
    app.extensions["shmq_live"] = live

    def admin() -> Admin:
        return Admin(namesrv, credentials=g.account.credentials, tls=tls)

    @app.before_request
    def who_and_why() -> Response | None:
        g.account = fixed if fixed is not None else sessions.get(session.get("token"))
        if request.endpoint in PUBLIC_ENDPOINTS:
            return None
        if g.account is None:
            if request.path.startswith("/api/"):
                abort(401)
            return redirect(url_for("login", next=request.full_path))
        if request.method == "POST":
            if request.form.get("csrf") != session.get("csrf"):
                abort(400, "the form is stale: reload the page")
            if request.endpoint != "logout" and not g.account.admin:
                abort(403, f"account {g.account.name} is read-only (not an ACL admin)")
        return None

    @app.context_processor
    def page_globals() -> dict[str, Any]:
        if "csrf" not in session:
            session["csrf"] = secrets.token_urlsafe(24)
        return {"account": g.get("account"), "login_mode": fixed is None,
                "csrf": session["csrf"], "namesrv": namesrv}  # fmt: skip

    app.add_template_filter(_when, "when")
    app.add_template_filter(_rate, "rate")
    app.add_template_filter(lambda b64: _body(b64)["text"][:80], "b64text")

    @app.errorhandler(ShmqError)
    def cluster_error(exc: ShmqError) -> tuple[str, int]:
        return render_template("error.html", error=str(exc)), 502

    def act(back: str, action: Callable[[], str]) -> Response:
        """Run a form's action; its outcome (or the cluster's error) as the next page's
        one-line message, and back to ``back``."""
        try:
            flash(action(), "ok")
        except ShmqError as exc:
            flash(str(exc), "error")
        return redirect(back)

    # -- login ----------------------------------------------------------------------------

    @app.route("/login", methods=["GET", "POST"])
    def login() -> str | Response:
        if fixed is not None:
            return redirect(url_for("cluster"))
        error = None
        if request.method == "POST":
            try:
                account = check_account(namesrv, Credentials(request.form["access_key"],
                                        request.form["secret_key"]), tls)  # fmt: skip
            except (LoginError, ValueError) as exc:
                error = str(exc)
            else:
                session.clear()
                session["token"] = sessions.add(account)
                target = request.args.get("next", "")
                return redirect(target if target.startswith("/") else url_for("cluster"))
        return render_template("login.html", error=error)

    @app.post("/logout")
    def logout() -> Response:
        sessions.remove(session.pop("token", None))
        return redirect(url_for("login"))

    # -- cluster --------------------------------------------------------------------------

    @app.get("/")
    def cluster() -> str:
        with admin() as a:
            brokers = a.cluster_list()
        for row in brokers:
            if row.get("status") is not None and row["brokerId"] == 0:
                row["live"] = live.sample(row["address"], _options(g.account, tls))
        return render_template("cluster.html", brokers=brokers)

    @app.get("/api/live")
    def api_live() -> Response:
        with admin() as a:
            masters = [r for r in a.cluster_list() if r["brokerId"] == 0 and r.get("status")]
        out = {}
        for row in masters:
            out[row["brokerName"]] = live.sample(row["address"], _options(g.account, tls))
        return jsonify(out)

    # -- topics ---------------------------------------------------------------------------

    @app.get("/topics")
    def topics() -> str:
        show_system = request.args.get("system") == "1"
        with admin() as a:
            names = a.topic_list()
            hidden = set(a.system_topics())
            rows = []
            for topic in names:
                system = _is_system(topic, hidden)
                if system and not show_system:
                    continue
                queues = a.topic_status(topic)
                last = max((q.last_update_timestamp for q in queues), default=0)
                rows.append({"topic": topic, "system": system, "queues": len(queues),
                             "messages": sum(q.max_offset - q.min_offset for q in queues),
                             "last": last})  # fmt: skip
        return render_template("topics.html", rows=rows, show_system=show_system)

    @app.post("/topics")
    def topic_update() -> Response:
        form = request.form
        topic = form.get("topic", "").strip()

        def update() -> str:
            if not topic:
                raise ShmqError("a topic needs a name")
            with admin() as a:
                changed = a.update_topic(topic, read_queue_nums=_int(form, "read_queues"),
                                         write_queue_nums=_int(form, "write_queues"),
                                         perm=_int(form, "perm"))  # fmt: skip
            return f"topic {topic} updated on {', '.join(changed)}"

        return act(url_for("topic", topic=topic) if topic else url_for("topics"), update)

    @app.get("/topics/<topic>")
    def topic(topic: str) -> str:
        with admin() as a:
            route = a.topic_route(topic)
            queues = a.topic_status(topic)
            groups = a.topic_consume_by_who(topic)
        return render_template("topic.html", topic=topic, route=route, queues=queues,
                               groups=groups)  # fmt: skip

    @app.post("/topics/<topic>/delete")
    def topic_delete(topic: str) -> Response:
        def delete() -> str:
            with admin() as a:
                return f"topic {topic} deleted from {', '.join(a.delete_topic(topic))}"

        return act(url_for("topics"), delete)

    @app.post("/topics/<topic>/send")
    def topic_send(topic: str) -> Response:
        form = request.form

        def send() -> str:
            from shmq.client.producer.producer import Producer
            from shmq.message import Message

            keys = form.get("keys", "").split()
            message = Message(topic, form.get("body", "").encode(), tags=form.get("tags") or None,
                              keys=keys or None)  # fmt: skip
            with Producer(TEST_PRODUCER_GROUP, namesrv, transport="tcp",
                          credentials=g.account.credentials, tls=tls) as producer:  # fmt: skip
                result = producer.send(message)
            return (f"sent {result.msg_id} to {result.message_queue.broker_name} queue "
                    f"{result.message_queue.queue_id} offset {result.queue_offset}")  # fmt: skip

        return act(url_for("topic", topic=topic), send)

    # -- consumer groups ------------------------------------------------------------------

    @app.get("/groups")
    def groups() -> str:
        with admin() as a:
            lag: dict[str, int] = collections.Counter()
            topics_of: dict[str, set[str]] = collections.defaultdict(set)
            for stats in a.broker_consume_stats().values():
                for group, queues in stats["groups"].items():
                    for q in queues:
                        lag[group] += q.diff
                        if not q.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                            topics_of[group].add(q.topic)
            tps: dict[str, float] = collections.Counter()
            for row in a.stats_all():
                if row.get("group"):
                    tps[row["group"]] += row.get("out_tps") or 0.0
            rows = [{"group": group, "topics": sorted(topics_of[group]), "lag": lag[group],
                     "tps": tps[group], "members": len(_members(a, group))}
                    for group in sorted(lag)]  # fmt: skip
        return render_template("groups.html", rows=rows)

    @app.get("/groups/<group>")
    def group(group: str) -> str:
        with admin() as a:
            try:
                progress = a.consumer_progress(group)
            except ShmqError as exc:  # no offsets yet: the page still shows members and DLQ
                progress, no_offsets = None, str(exc)
            else:
                no_offsets = None
            connection = _connection(a, group)
            dlq = a.query_dlq(group)
        topics = sorted({q.topic for q in progress.queues}) if progress else []
        return render_template("group.html", group=group, progress=progress, topics=topics,
                               no_offsets=no_offsets, connection=connection, dlq=dlq)  # fmt: skip

    @app.post("/groups/<group>/reset")
    def group_reset(group: str) -> Response:
        form = request.form
        topic = form.get("topic", "")

        def reset() -> str:
            when = form.get("time", "").strip()
            timestamp = -1 if form.get("skip") else _parse_time(when)
            with admin() as a:
                offsets = a.reset_offset(group, topic, timestamp)
            done = "skipped to the end" if timestamp == -1 else f"reset to {when}"
            return f"{group} on {topic}: {len(offsets)} queues {done}"

        return act(url_for("group", group=group), reset)

    @app.post("/groups/<group>/dlq/resend")
    def dlq_resend(group: str) -> Response:
        msg_id = request.form.get("msg_id") or None

        def resend() -> str:
            with admin() as a:
                rows = a.resend_dlq(group, msg_id)
            failed = [r for r in rows if r.get("error")]
            if failed:
                raise ShmqError(f"resend of {failed[0]['msgId']} failed: {failed[0]['error']}")
            return "resent " + ", ".join(f"{r['msgId']} to {r['originTopic']}" for r in rows)

        return act(url_for("group", group=group), resend)

    # -- producers ------------------------------------------------------------------------

    @app.get("/producers")
    def producers() -> str:
        name = request.args.get("group", "").strip()
        connection, error = None, None
        if name:
            with admin() as a:
                try:
                    connection = a.producer_connection(name)
                except ResponseError as exc:
                    error = exc.remark
        return render_template("producers.html", group=name, connection=connection,
                               error=error)  # fmt: skip

    # -- messages -------------------------------------------------------------------------

    @app.get("/messages")
    def messages() -> str:
        args = request.args
        by = args.get("by", "key")
        topic, found, error = args.get("topic", "").strip(), None, None
        try:
            with admin() as a:
                if by == "key" and args.get("key"):
                    found = a.query_msg_by_key(topic, args["key"].strip())
                elif by == "id" and args.get("id"):
                    found = [a.query_msg_by_id(args["id"].strip(), topic or None)]
                elif by == "time" and topic:
                    end = _parse_time(args["end"]) if args.get("end") else None
                    found = a.query_msg_by_time(topic, _parse_time(args.get("begin", "")), end)
        except ShmqError as exc:
            error = str(exc)
        return render_template("messages.html", by=by, args=args, found=found, error=error)

    @app.get("/messages/<msg_id>")
    def message(msg_id: str) -> str:
        topic = request.args.get("topic") or None
        with admin() as a:
            msg = a.query_msg_by_id(msg_id, topic)
            try:
                trace = a.query_msg_trace_by_id(msg["msgId"])
            except NoRouteError:  # no client traced anything yet: no trace topic
                trace = {"produce": [], "transactions": [], "consume": []}
        return render_template("message.html", msg=msg, body=_body(msg["body"]),
                               events=_trace_events(trace),
                               dlq=msg["topic"].startswith(DLQ_GROUP_TOPIC_PREFIX))  # fmt: skip

    return app


def _options(account: Account, tls: TlsOptions | None) -> dict[str, Any]:
    return {"credentials": account.credentials, "tls": tls}


def _is_system(topic: str, hidden: set[str]) -> bool:
    return (topic in hidden or is_system_topic(topic)
            or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)))  # fmt: skip


def _connection(a: Admin, group: str) -> dict[str, Any] | None:
    """The group's online members, None when none is online."""
    try:
        return a.consumer_connection(group)
    except ResponseError:
        return None


def _members(a: Admin, group: str) -> list[dict[str, Any]]:
    connection = _connection(a, group)
    return connection.get("connectionSet", []) if connection else []


def _int(form: Any, name: str) -> int:
    try:
        return int(form.get(name, ""))
    except ValueError:
        raise ShmqError(f"{name.replace('_', ' ')} must be a whole number") from None


def _parse_time(text: str) -> int:
    """Epoch ms from ``YYYY-MM-DD HH:MM[:SS]`` or ``YYYY-MM-DDTHH:MM`` (local time, what a
    browser's datetime-local field sends) or from a number of ms."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ShmqError(f"not a time: {text!r} (use YYYY-MM-DD HH:MM:SS or epoch ms)") from None


def _trace_events(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A trace timeline's produce, transaction and consume records in one list by time,
    each with its ``kind`` and a ``status`` (a transaction's is its state)."""
    events = []
    for kind, records in (("produce", trace["produce"]), ("transaction", trace["transactions"]),
                          ("consume", trace["consume"])):  # fmt: skip
        for r in records:
            status = r.get("status") or r.get("transactionState") or ""
            events.append({**r, "kind": kind, "status": status, "costTime": r.get("costTime")})
    return sorted(events, key=lambda e: e["timeStamp"])


def _body(encoded: str) -> dict[str, Any]:
    """A message body for display: text when it is UTF-8, else hex."""
    raw = base64.b64decode(encoded)
    try:
        return {"text": raw.decode(), "size": len(raw), "binary": False}
    except UnicodeDecodeError:
        return {"text": raw[:4096].hex(" "), "size": len(raw), "binary": True}


def _when(ms: int | None) -> str:
    """Epoch ms as local time (ms kept), ``-`` for none."""
    if not ms or ms <= 0:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f".{ms % 1000:03d}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"
