"""``shmq dashboard`` in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium loads each page against a real broker and checks
what it shows (the broker and its role, the topic and its messages, the group and its lag
per queue, a message's body and properties), then acts through the UI: it creates a topic
and resends a message from the DLQ, and checks the cluster changed. Screenshots are saved
(to ``SHMQ_DASHBOARD_SCREENSHOTS`` when set: how ``docs/screenshots`` was made)."""

from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("flask", reason="the dashboard extra is not installed")
pytest.importorskip("waitress", reason="the dashboard extra is not installed")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402
from waiting import wait_for  # noqa: E402

import shmq  # noqa: E402
from e2e_helpers import embedded  # noqa: E402
from shmq.dashboard import DashboardServer, create_app  # noqa: E402

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("needs Debian's chromium and chromium-driver", allow_module_level=True)

TOPIC, GROUP = "DashRefunds", "dash-refunds"
PARKED = 2  # messages the failing consumer parks in the DLQ (and commits past)
WAITING = 5  # messages sent after it stopped: the group's lag
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--window-size=1280,860", "--hide-scrollbars")  # fmt: skip


def browser(user_data_dir: str):
    """A headless Chromium with a fresh profile in ``user_data_dir``."""
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(0)
    return driver


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A broker where ``GROUP`` parked ``PARKED`` messages of ``TOPIC`` in its DLQ and has
    ``WAITING`` to consume, the dashboard serving it on a free port, and a browser:
    ``(namesrv, url, driver, screenshot directory)``; all stopped at the end."""
    root = tmp_path_factory.mktemp("dashboard")
    shots = os.environ.get("SHMQ_DASHBOARD_SCREENSHOTS") or str(root / "screenshots")
    os.makedirs(shots, exist_ok=True)
    with embedded(str(root / "store"), topics={TOPIC: 2}) as mq:
        with shmq.Producer("dash-producer", mq.namesrv) as producer:
            for i in range(PARKED):
                producer.send(shmq.Message(TOPIC, f"refund {i}".encode(), keys=[f"refund-{i}"],
                                           properties={"why": "test"}))  # fmt: skip
            calls: list[str] = []
            consumer = shmq.PushConsumer(
                GROUP, mq.namesrv, max_reconsume_times=0,
                listener=lambda msgs, _ctx: calls.extend(m.body for m in msgs)
                or shmq.ConsumeResult.RECONSUME_LATER,
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            )  # fmt: skip
            consumer.subscribe(TOPIC)
            consumer.start()
            try:
                with shmq.Admin(mq.namesrv) as admin:
                    wait_for(lambda: len(admin.query_dlq(GROUP)) == PARKED
                             and admin.consumer_progress(GROUP, TOPIC).diff_total == 0,
                             timeout=60, what="the DLQ and the committed offsets")  # fmt: skip
            finally:
                consumer.shutdown()
            for i in range(WAITING):
                producer.send(shmq.Message(TOPIC, f"later {i}".encode(), keys=[f"later-{i}"]))
        with DashboardServer(create_app(mq.namesrv), port=0) as server:
            driver = browser(str(root / "chromium"))
            try:
                yield mq.namesrv, server.url, driver, shots
            finally:
                driver.quit()


def cells(driver, table_id: str, key_attr: str, key: str) -> list[str]:
    row = driver.find_element(By.CSS_SELECTOR, f'#{table_id} tr[{key_attr}="{key}"]')
    return [td.text for td in row.find_elements(By.TAG_NAME, "td")]


def flash(driver, containing: str = "") -> str:
    """The outcome line, with ``containing`` in it, of the page a form's post led to
    (waited for: a click on a submit button returns before the next page loads, and the
    page before it may show an outcome line of its own)."""

    def shown(d) -> str | None:
        found = d.find_elements(By.CSS_SELECTOR, ".flash")
        return found[0].text if found and containing in found[0].text else None

    return WebDriverWait(driver, 30, ignored_exceptions=(StaleElementReferenceException,)).until(
        shown
    )


def test_cluster_page_shows_the_broker_and_live_rates(site):
    _namesrv, url, driver, shots = site
    driver.get(url + "/")
    row = cells(driver, "brokers", "data-broker", "broker-a")
    assert row[1:3] == ["broker-a", "0"] and row[4] == "ASYNC_MASTER"
    assert row[8].endswith("%")  # the store disk's used share
    # the page polls /api/live: once two snapshots exist, the rate cells hold numbers
    WebDriverWait(driver, 30).until(lambda d: cells(d, "brokers", "data-broker", "broker-a")[5]
                                    != "-")  # fmt: skip
    float(cells(driver, "brokers", "data-broker", "broker-a")[5].replace(",", ""))
    time.sleep(2.5)  # one more point on the charts for the screenshot (not asserted)
    driver.save_screenshot(os.path.join(shots, "cluster.png"))


def test_group_page_shows_the_lag_per_queue_and_resends_from_the_dlq(site):
    namesrv, url, driver, shots = site
    driver.get(url + "/groups")
    row = cells(driver, "groups", "data-group", GROUP)
    assert row[1] == TOPIC and row[2] == str(WAITING)
    driver.find_element(By.LINK_TEXT, GROUP).click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "lag-total"))
    assert driver.find_element(By.ID, "lag-total").text == str(WAITING)
    lags = driver.find_elements(By.CSS_SELECTOR, f'#progress tr[data-queue^="{TOPIC}/"] td.lag')
    assert sum(int(td.text) for td in lags) == WAITING and len(lags) == 2
    parked = driver.find_elements(By.CSS_SELECTOR, "#dlq tr[data-msg]")
    assert len(parked) == PARKED
    driver.save_screenshot(os.path.join(shots, "consumer-group.png"))
    msg_id = parked[0].get_attribute("data-msg")
    parked[0].find_element(By.CSS_SELECTOR, "button.resend").click()
    assert flash(driver, "resent") == f"resent {msg_id} to {TOPIC}"
    with shmq.Admin(namesrv) as admin:
        stored = sum(q.max_offset for q in admin.topic_status(TOPIC))
        assert stored == PARKED + WAITING + 1
        assert admin.consumer_progress(GROUP, TOPIC).diff_total == WAITING + 1
    assert driver.find_element(By.ID, "lag-total").text == str(WAITING + 1)
    driver.find_element(By.ID, "skip-accumulated").click()
    assert flash(driver, "skipped") == f"{GROUP} on {TOPIC}: 2 queues skipped to the end"
    assert driver.find_element(By.ID, "lag-total").text == "0"


def test_topics_page_creates_a_topic(site):
    namesrv, url, driver, shots = site
    driver.get(url + "/topics")
    assert cells(driver, "topics", "data-topic", TOPIC)[1] == "2"
    driver.find_element(By.ID, "new-topic").send_keys("DashCreated")
    driver.find_element(By.ID, "create-topic-button").click()
    assert flash(driver, "DashCreated") == "topic DashCreated updated on broker-a"
    assert driver.find_element(By.ID, "topic-name").text == "DashCreated"
    queues = driver.find_elements(By.CSS_SELECTOR, "#queues tbody tr")
    assert len(queues) == 4
    with shmq.Admin(namesrv) as admin:
        route = admin.topic_route("DashCreated")
    assert [(q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]] == [
        ("broker-a", 4)
    ]
    driver.get(url + "/topics")
    assert cells(driver, "topics", "data-topic", "DashCreated")[1:3] == ["4", "0"]
    driver.save_screenshot(os.path.join(shots, "topics.png"))


def test_messages_page_finds_a_message_by_key_and_shows_it(site):
    _namesrv, url, driver, shots = site
    driver.get(url + "/messages")
    driver.find_element(By.NAME, "topic").send_keys(TOPIC)
    driver.find_element(By.NAME, "key").send_keys("refund-1")
    driver.find_element(By.CSS_SELECTOR, "#query button").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "found"))
    found = driver.find_elements(By.CSS_SELECTOR, "#found tbody tr")
    assert found and all("refund 1" in row.text for row in found)  # 2 once resent from the DLQ
    found[0].find_element(By.TAG_NAME, "a").click()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "body"))
    assert driver.find_element(By.ID, "body").text == "refund 1"
    props = driver.find_element(By.ID, "properties").text
    assert "why test" in props and "KEYS refund-1" in props
    driver.save_screenshot(os.path.join(shots, "message.png"))
