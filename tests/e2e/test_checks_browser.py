"""The Checks page and a check's page in headless Chromium against a real
uvicorn (the set-up of tests/e2e/test_browser.py), with pings sent over HTTP
to the real ping endpoints as a crontab line sends them. A viewer sees the
states, the pings and their logs (escaped), never a ping URL; an admin sees
the ping URL and "Run it in Croniq instead", which opens the job admin's
add form prefilled. Screenshots land in test-artifacts/screenshots/."""

import pytest
import requests

from tests.e2e import test_browser as browser
from tests.e2e.test_browser import PASSWORD, USERNAME, django_shell, log_in, screenshot

pytestmark = pytest.mark.e2e

# The headless Chromium and the real uvicorn of the dashboard's browser test.
chromium = browser.chromium
server = browser.server

ADMIN = "check-admin"

WORLD = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from checks.models import Check

users = get_user_model().objects
viewer = users.create_user({username!r}, password={password!r}, is_staff=True)
viewer.groups.add(Group.objects.get(name="Croniq viewers"))
admin = users.create_user({admin!r}, password={password!r}, is_staff=True)
admin.groups.add(Group.objects.get(name="Croniq admins"))
backup = Check.objects.create(
    name="db1-backup", schedule="30 2 * * *", timezone="Europe/Berlin", grace=1800,
    description="pg_dump on db1", labels=["host:db1"],
)
heartbeat = Check.objects.create(name="heartbeat", period=300, grace=60)
Check.objects.create(name="never-pinged", period=3600)
out({{"backup": backup.token, "heartbeat": heartbeat.token}})
"""


@pytest.fixture
def world(server, e2e_database):
    tokens = django_shell(
        e2e_database, WORLD.format(username=USERNAME, password=PASSWORD, admin=ADMIN)
    )
    pinged = server.url + "/ping/"
    # As `croniq-runner wrap` and curl in a crontab line send them.
    for url, body in (
        (f"{pinged}{tokens['backup']}/start", b""),
        (f"{pinged}{tokens['backup']}/0", b"dumped 2 GB\n<b>not bold</b>\n\xff\xfe done\n"),
        (f"{pinged}{tokens['heartbeat']}", b""),
        (f"{pinged}{tokens['heartbeat']}/fail", b"\x1b[31mconnection refused\x1b[0m\n"),
    ):
        assert requests.post(url, data=body, timeout=30).status_code == 200
    return {"server": server, "tokens": tokens}


@pytest.fixture
def page(chromium, world):
    context = chromium.new_context(locale="en-GB", viewport={"width": 1360, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def test_a_viewer_reads_the_checks_and_a_checks_pings(page, world):
    server = world["server"]
    log_in(page, server)
    page.click("a[href='/checks/']")
    page.wait_for_url(server.url + "/checks/")

    states = {
        row.get_attribute("data-check"): row.locator("span.state").inner_text()
        for row in page.locator("tr[data-check]").all()
    }
    assert states == {"db1-backup": "up", "heartbeat": "down", "never-pinged": "new (never pinged)"}
    screenshot(page, "checks")

    page.click("nav.state-filter >> text=down (1)")
    assert page.locator("tr[data-check]").count() == 1

    page.goto(server.url + "/checks/db1-backup/")
    rows = page.locator("tr[data-ping]")
    assert rows.count() == 2
    newest = rows.first
    assert "exit status" in newest.inner_text() and "127.0.0.1" in newest.inner_text()
    newest.locator("summary").click()
    body = newest.locator("pre[data-ping-body]").inner_text()
    assert "<b>not bold</b>" in body and "\ufffd\ufffd done" in body
    assert page.locator("[data-ping-url]").count() == 0
    assert page.locator("[data-run-in-croniq]").count() == 0
    content = page.content()
    assert all(token not in content for token in world["tokens"].values())
    screenshot(page, "check_pings")
    assert page.problems == []


def test_an_admin_sees_the_ping_url_and_moves_the_check_to_a_job(page, world):
    server = world["server"]
    page.goto(server.url + "/")
    page.fill("input[name=username]", ADMIN)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(server.url + "/")

    page.goto(server.url + "/checks/heartbeat/")
    assert world["tokens"]["heartbeat"] in page.locator("[data-ping-url]").inner_text()
    page.locator("tr[data-ping]").first.locator("summary").click()
    shown = page.locator("pre[data-ping-body]").first.inner_text()
    assert shown.strip() == "\\x1b[31mconnection refused\\x1b[0m"

    page.click("[data-run-in-croniq]")
    page.wait_for_url("**/admin/scheduler/job/add/**")
    assert page.input_value("input[name=name]") == "heartbeat"
    assert page.input_value("input[name=schedule]") == "@every 5m"
    assert page.input_value("input[name=timezone]") == "UTC"
    screenshot(page, "check_to_job")
    assert page.problems == []
