"""A run whose agent was killed with SIGKILL, in headless Chromium against
a real uvicorn and a real agent: the execution page says "runner silent"
with its lease and the retry to come, its live dot stands still, and the
runner's row says silent before anyone marks it offline.

Same browser setup as test_browser.py (system Chromium through playwright;
skipped outside CI when either is missing). Screenshots land in
test-artifacts/screenshots/.
"""

import re

import pytest

from harness.processes import Server, start_agent
from tests.e2e.test_browser import (  # noqa: F401 (a fixture)
    chromium,
    django_shell,
    screenshot,
    wait_until_healthy,
)

pytestmark = pytest.mark.e2e

OPERATOR = ("operator", "croniq-operator-pw")
# A short heartbeat so the runner is silent 4 s after its last one; a long
# lease so the run is still running, its lease ticking, while the page is
# read. No loop runs: nothing reaps the run or marks the runner offline.
HEARTBEAT = 2
LEASE_TTL = 45

WORLD = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from runners.models import RunnerToken
from scheduler.models import Execution, Job

now = timezone.now()
user = get_user_model().objects.create_user({name!r}, password={password!r}, is_staff=True)
user.groups.add(Group.objects.get(name="Croniq operators"))
job = Job.objects.create(
    name="long-sleep", schedule="0 0 1 1 *", labels=["liveness"],
    command="echo started; sleep 600",
)
run = Execution.objects.create(
    job=job, scheduled_for=now, run_after=now, created_at=now, state="pending", trigger="manual",
)
out({{"run": run.pk, "token": RunnerToken.issue("liveness")[1]}})
"""


@pytest.fixture
def server(e2e_database, tmp_path):
    process = Server(
        e2e_database,
        tmp_path / "web.log",
        CRONIQ_HEARTBEAT_INTERVAL=HEARTBEAT,
        CRONIQ_LEASE_TTL=LEASE_TTL,
    )
    try:
        wait_until_healthy(process)
        yield process
    finally:
        process.stop()


@pytest.fixture
def world(server, e2e_database):
    name, password = OPERATOR
    return django_shell(e2e_database, WORLD.format(name=name, password=password))


@pytest.fixture
def page(chromium, server):  # noqa: F811 (the imported fixture)
    context = chromium.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    problems = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
    page.problems = problems
    yield page
    context.close()


def log_in(page, server):
    name, password = OPERATOR
    page.goto(server.url + "/")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]")
    page.wait_for_url(server.url + "/")


def test_a_run_of_a_killed_agent_says_its_runner_is_silent(page, server, world, tmp_path):
    agent = start_agent(
        server.url, world["token"], tmp_path / "agent.log", "--name", "liveness-1",
        "--labels", "liveness",
    )  # fmt: skip
    try:
        log_in(page, server)
        page.goto(f"{server.url}/executions/{world['run']}/")
        # Claimed and started: its output arrives, the dot pulses.
        page.wait_for_function(
            "document.querySelector('pre#log').textContent.includes('started')", timeout=30_000
        )
        indicator = page.locator("[data-live-indicator]")
        assert indicator.inner_text() == "live"
        assert indicator.evaluate("el => getComputedStyle(el, '::before').animationName") == (
            "pulse"
        )
        assert page.locator("[data-liveness]").is_hidden()

        agent.kill()  # SIGKILL: no finish, no hand-back, no more heartbeats

        # Two heartbeat intervals on, the page says so without a reload.
        page.wait_for_selector("[data-liveness]:not([hidden])", timeout=30_000)
        said = page.locator("[data-liveness]").inner_text()
        assert re.fullmatch(
            r"runner silent \d+ s; lease expires in \d+ s; it will be retried", said
        ), said
        assert page.locator("[data-execution-state] .state").inner_text() == "running"
        assert indicator.inner_text() == "runner silent"
        assert indicator.evaluate("el => getComputedStyle(el, '::before').animationName") == (
            "none"
        )
        screenshot(page, "execution-runner-silent")

        page.goto(server.url + "/runners/")
        row = page.locator("tr[data-runner=liveness-1]")
        assert row.get_attribute("data-state") == "silent"
        assert row.locator("[data-runner-state]").inner_text() == "silent"
        assert "long-sleep" in row.inner_text()
        screenshot(page, "runners-runner-silent")
    finally:
        agent.kill()
    assert page.problems == []
