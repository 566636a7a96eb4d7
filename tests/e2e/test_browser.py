"""The dashboard in headless Chromium against a real uvicorn.

Needs the Debian `chromium` package and the `playwright` Python package (its
API drives the system Chromium through `executable_path`; no browser download).
Outside CI the tests skip when either is missing; with CI=true they must run.
Screenshots of every page land in test-artifacts/screenshots/.
"""

import json
import os
import re
import shutil
import textwrap
import time

import pytest
import requests

from harness.processes import ROOT, Server, start_agent
from tests.agent.world import python

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
USERNAME, PASSWORD = "operator", "croniq-operator-pw"
# An instant as every page shows it (core.instants): "2026-12-05 09:00:00".
ISO_SECONDS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"


def missing_browser():
    if not shutil.which(CHROMIUM):
        return f"{CHROMIUM} not found (apt-get install chromium chromium-driver)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is not installed (pip install playwright)"
    return None


@pytest.fixture(scope="module")
def chromium():
    reason = missing_browser()
    if reason:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def server(e2e_database, tmp_path):
    """A real uvicorn; on a busy machine its first answer can take seconds,
    so wait for it patiently and never leave it running."""
    process = Server(e2e_database, tmp_path / "web.log")
    try:
        wait_until_healthy(process)
        yield process
    finally:
        process.stop()


def wait_until_healthy(server, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"server exited:\n{server.output()}")
        try:
            if requests.get(server.url + "/healthz", timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server not healthy after {timeout}s:\n{server.output()}")


def django_shell(db, code):
    """Run `code` in `manage.py shell` against the server's database; it
    reports back with out(value), read as JSON from the last output line."""
    prelude = "import json\ndef out(value): print(json.dumps(value, default=str))\n"
    return json.loads(python(db, prelude + textwrap.dedent(code)).strip().splitlines()[-1])


WORLD = """
from datetime import timedelta
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone
from audit.recording import record
from runners.models import Runner
from scheduler.models import Execution, Job, LogChunk

now = timezone.now()
viewer = get_user_model().objects.create_user({username!r}, password={password!r}, is_staff=True)
viewer.groups.add(Group.objects.get(name="Croniq viewers"))
report = Job.objects.create(
    name="nightly-report", schedule="30 2 * * *", timezone="Europe/Berlin",
    command="python report.py", labels=["linux"], next_run_at=now + timedelta(hours=3),
)
Job.objects.create(name="cleanup", schedule="@every 5m", command="sh cleanup.sh")
runner = Runner.objects.create(
    name="web-1", labels=["linux", "gpu"], session="s", registered_at=now, last_seen_at=now,
    takeover_count=7, flapping=True, flapping_since=now - timedelta(minutes=4),
)
Runner.objects.create(
    name="web-2", labels=["linux"], session="s", registered_at=now, last_seen_at=now,
)
for i in range(1, 30):
    at = now - timedelta(days=i)
    state = "failed" if i % 5 == 0 else ("lost" if i % 11 == 0 else "succeeded")
    Execution.objects.create(
        job=report, scheduled_for=at, run_after=at, created_at=at, state=state,
        claimed_at=at, finished_at=at + timedelta(seconds=20 + (i * 13) % 40),
        exit_code=0 if state == "succeeded" else 1, runner=runner,
    )
running = Execution.objects.create(
    job=report, scheduled_for=now, run_after=now, created_at=now, state="running",
    claimed_at=now, runner=runner, lease=1,
)
LogChunk.objects.create(execution=running, seq=0, data="report: starting\\n")
record("runner.takeover", target=runner, actor=runner, data={{"session": "s"}})
record("runner.flapping", target=runner)
out({{"running": running.pk}})
"""


@pytest.fixture
def world(server, e2e_database):
    ids = django_shell(e2e_database, WORLD.format(username=USERNAME, password=PASSWORD))
    return {"db": e2e_database, "server": server, **ids}


@pytest.fixture
def page(chromium, world):
    # A viewer far from UTC, so converted times differ from the server's.
    context = chromium.new_context(
        timezone_id="Asia/Tokyo", locale="en-GB", viewport={"width": 1360, "height": 900}
    )
    page = context.new_page()
    problems = []

    def console(message):
        # /favicon.ico included: Chromium asks for it, and it answers.
        if message.type == "error":
            problems.append(f"{message.text} {message.location.get('url', '')}")

    page.on("console", console)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "response",
        lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"),
    )
    page.problems = problems
    yield page
    context.close()


def log_in(page, server):
    page.goto(server.url + "/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(server.url + "/")


def screenshot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_an_operator_logs_in_and_reads_every_dashboard_page(page, world):
    server = world["server"]
    log_in(page, server)

    # Overview: counts, the result strip, the next run on the job's own clock
    # (Europe/Berlin, not the viewer's Tokyo) with UTC beside it.
    assert page.locator("[data-state=running] .count").inner_text() == "1"
    cells = page.locator("tr[data-job=nightly-report] .strip .cell")
    assert cells.count() == 20
    assert page.locator("tr[data-job=nightly-report] .cell.state-failed").count() >= 1
    next_run = page.locator("tr[data-job=nightly-report] time")
    assert "UTC" in next_run.get_attribute("title")
    assert "job's zone (Europe/Berlin)" in next_run.get_attribute("title")
    assert re.fullmatch(rf"{ISO_SECONDS} CES?T", next_run.inner_text())
    assert page.locator("tr[data-job=nightly-report] .utc").inner_text().endswith("UTC)")
    assert "your zone, Asia/Tokyo" in page.locator("[data-viewer-tz]").inner_text()
    screenshot(page, "overview")

    # Job page: schedule in words, ten fire times at 02:30 Berlin time, chart
    # and history (in the viewer's timezone).
    page.click("tr[data-job=nightly-report] a >> text=nightly-report")
    page.wait_for_url("**/jobs/nightly-report/")
    fires = page.locator("[data-next-fires] time")
    assert fires.count() == 10
    assert " 02:30:00 CE" in fires.first.inner_text()
    assert page.locator("[data-next-fires] .utc").count() == 10
    started = page.locator("table.runs tbody tr").nth(1).locator("time").first
    assert "UTC" in started.get_attribute("title")
    assert "your zone (Asia/Tokyo)" in started.get_attribute("title")
    # What the script wrote: ISO order, 24-hour clock, the viewer's zone.
    assert re.fullmatch(rf"{ISO_SECONDS} GMT\+9", started.inner_text())
    assert page.locator("[data-schedule-words]").inner_text() != "30 2 * * *"
    assert page.locator("svg.duration-chart .point").count() == 29
    assert page.locator("table.runs tbody tr").count() == 30
    screenshot(page, "job")

    # Execution page of a finished run.
    page.locator("table.runs tbody tr").nth(1).locator("a").first.click()
    page.wait_for_url("**/executions/*/")
    assert page.locator("[data-live-indicator]").count() == 0
    screenshot(page, "execution")

    # Runners: the flapping runner carries its badge, the calm one does not.
    page.click("nav >> text=Runners")
    page.wait_for_url("**/runners/")
    assert page.locator("tr[data-runner=web-1] [data-flapping]").is_visible()
    assert page.locator("tr[data-runner=web-2] [data-flapping]").count() == 0
    assert "nightly-report" in page.locator("tr[data-runner=web-1]").inner_text()
    screenshot(page, "runners")

    # Audit: filter by action through the GET form.
    page.click("nav >> text=Audit")
    page.wait_for_url("**/audit/")
    assert page.locator("table.audit tbody tr").count() == 2
    page.fill("input[name=action]", "runner.flapping")
    page.click("form.filters button")
    page.wait_for_url("**/audit/?action=runner.flapping*")
    assert page.locator("table.audit tbody tr").count() == 1
    screenshot(page, "audit")

    assert page.problems == []


def test_a_viewer_in_berlin_with_an_american_browser_reads_iso_times(chromium, world):
    """The report behind the rule: an en-US browser's script wrote
    "12/05/2026, 04:05:57 AM UTC" beside the server's ISO text."""
    context = chromium.new_context(timezone_id="Europe/Berlin", locale="en-US")
    try:
        page = context.new_page()
        log_in(page, world["server"])
        page.goto(world["server"].url + "/jobs/nightly-report/")
        page.wait_for_selector("table.runs time[data-localised]")

        texts = page.locator("time").all_inner_texts()
        assert len(texts) > 20
        wrong = [t for t in texts if not re.fullmatch(rf"{ISO_SECONDS} CES?T", t)]
        assert wrong == []
        assert "your zone, Europe/Berlin" in page.locator("[data-viewer-tz]").inner_text()
    finally:
        context.close()


def test_the_alerts_page_shows_a_failing_jobs_streak_and_what_was_sent(page, world):
    server, db = world["server"], world["db"]
    django_shell(
        db,
        """
        from datetime import timedelta
        from django.utils import timezone
        from notifications.models import Channel, Delivery, Event, Mute, Notification
        from scheduler.models import Job, JobHealth

        now = timezone.now()
        job = Job.objects.get(name="nightly-report")
        JobHealth.objects.create(
            job=job, failure_streak=4, failing_since=now - timedelta(days=4),
            last_failure_at=now - timedelta(hours=1), last_success_at=now - timedelta(days=5),
        )
        hook = Channel.objects.create(name="ops-hook", kind="webhook", url="https://hooks.example/x")
        event = Event.objects.create(name="job.failing", at=now, job=job, data={"streak": 4})
        sent = Notification.objects.create(
            event=event, name="job.failing", channel=hook, job=job, state="delivered",
            created_at=now, attempts=1, delivered_at=now, last_status=204,
            message={"summary": "nightly-report failed 4 times in a row"},
        )
        Delivery.objects.create(
            notification=sent, attempt=1, at=now, ok=True, status_code=204, latency=0.08
        )
        Mute.objects.create(
            until=now + timedelta(hours=2), note="database upgrade", created_by="alice",
            created_at=now,
        )
        out(str(sent.pk))
        """,
    )
    log_in(page, server)
    page.click("nav >> text=Alerts")
    page.wait_for_url("**/alerts/")

    failing = page.locator("tr[data-failing-job=nightly-report]")
    assert failing.locator("[data-streak]").inner_text() == "4"
    assert failing.locator("a").get_attribute("href") == "/jobs/nightly-report/"
    # Instants in the viewer's timezone (Tokyo), UTC on hover.
    since = failing.locator("time").first
    assert "UTC" in since.get_attribute("title") and "UTC" not in since.inner_text()
    sent = page.locator("table.notifications tbody tr").first
    assert "nightly-report failed 4 times in a row" in sent.inner_text()
    assert sent.locator(".state").inner_text() == "delivered"
    assert "80 ms" in sent.inner_text()
    assert page.locator("[data-notification-state=delivered] .count").inner_text() == "1"
    assert "database upgrade" in page.locator("table.mutes").inner_text()
    screenshot(page, "alerts")

    # The streak is on the job's page too.
    failing.locator("a").click()
    page.wait_for_url("**/jobs/nightly-report/")
    assert "4 in a row" in page.locator("[data-failure-streak]").inner_text()
    assert page.problems == []


def test_the_execution_page_tails_the_log_while_the_run_goes_on(page, world):
    server, db, pk = world["server"], world["db"], world["running"]
    log_in(page, server)
    page.goto(f"{server.url}/executions/{pk}/")
    log = page.locator("pre#log")
    assert log.text_content() == "report: starting\n"
    assert page.locator("[data-live-indicator]").is_visible()

    django_shell(
        db,
        f"""
        from scheduler.models import LogChunk
        LogChunk.objects.create(execution_id={pk}, seq=1, data="row 1 of 2\\n")
        LogChunk.objects.create(execution_id={pk}, seq=2, data="row 2 of 2\\n")
        out(1)
        """,
    )
    page.wait_for_function(
        "document.querySelector('pre#log').textContent.includes('row 2 of 2')", timeout=10_000
    )
    assert log.text_content() == "report: starting\nrow 1 of 2\nrow 2 of 2\n"
    screenshot(page, "execution-live")

    django_shell(
        db,
        f"""
        from django.utils import timezone
        from scheduler.models import Execution, LogChunk
        LogChunk.objects.create(execution_id={pk}, seq=3, data="done\\n")
        Execution.objects.filter(pk={pk}).update(
            state="succeeded", finished_at=timezone.now(), exit_code=0
        )
        out(1)
        """,
    )
    # The tail picks up the last chunk, shows the final state and stops.
    page.wait_for_selector("[data-live-indicator]", state="detached", timeout=10_000)
    polls = []
    page.on("request", lambda r: "/log?after=" in r.url and polls.append(r.url))
    page.wait_for_timeout(2500)
    assert polls == []
    assert log.text_content().endswith("row 2 of 2\ndone\n")
    assert page.locator("[data-execution-state] .state").inner_text() == "succeeded"
    # The fields that change at the end follow without a reload.
    assert page.locator("[data-field=exit_code]").inner_text() == "0"
    assert page.locator("[data-field=duration]").inner_text() != "—"
    finished = page.locator("[data-field=finished_at] time")
    assert "UTC" in finished.get_attribute("title")
    assert re.fullmatch(rf"{ISO_SECONDS} GMT\+9", finished.inner_text())
    assert page.problems == []


def test_run_now_in_the_admin_then_the_log_arrives_live_from_a_real_agent(page, world, tmp_path):
    server, db = world["server"], world["db"]
    job = django_shell(
        db,
        """
        from django.contrib.auth import get_user_model
        from scheduler.models import Job
        from runners.models import RunnerToken
        # Running jobs from the admin takes the admin's permissions.
        get_user_model().objects.filter(username="operator").update(is_superuser=True)
        job = Job.objects.create(
            name="slow-count", schedule="0 0 1 1 *", labels=["browser"],
            command="for i in 1 2 3 4 5 6 7 8; do echo tick-$i; sleep 1; done",
        )
        out({"pk": job.pk, "token": RunnerToken.issue("browser")[1]})
        """,
    )
    log_in(page, server)
    page.goto(server.url + "/admin/scheduler/job/")
    page.check(f"input[name=_selected_action][value='{job['pk']}']")
    page.select_option("select[name=action]", "run_now")
    page.click("button[name=index]")
    assert "Started 1 job" in page.locator(".messagelist").inner_text()

    agent = start_agent(
        server.url, job["token"], tmp_path / "agent.log", "--name", "browser-1",
        "--labels", "browser",
    )  # fmt: skip
    try:
        page.goto(server.url + "/jobs/slow-count/")
        page.locator("table.runs tbody tr a").first.click()
        page.wait_for_url("**/executions/*/")
        # The page was opened before the job finished: the ticks stream in.
        page.wait_for_function(
            "document.querySelector('pre#log').textContent.includes('tick-2')", timeout=20_000
        )
        assert "tick-8" not in page.locator("pre#log").text_content()
        assert page.locator("[data-live-indicator]").is_visible()
        screenshot(page, "run-now-live")
        page.wait_for_selector("[data-live-indicator]", state="detached", timeout=30_000)
        text = page.locator("pre#log").text_content()
        assert [f"tick-{i}" for i in range(1, 9)] == [line for line in text.split("\n") if line]
        assert page.locator("[data-execution-state] .state").inner_text() == "succeeded"
        assert page.locator("[data-field=runner]").inner_text() == "browser-1"
        assert page.locator("[data-field=exit_code]").inner_text() == "0"
        screenshot(page, "run-now-finished")
    finally:
        agent.stop()
        print(agent.output())
    assert page.problems == []


def test_a_live_execution_page_goes_to_the_login_when_the_session_ends(page, world):
    server, db, pk = world["server"], world["db"], world["running"]
    log_in(page, server)
    page.goto(f"{server.url}/executions/{pk}/")
    assert page.locator("[data-live-indicator]").is_visible()

    django_shell(
        db,
        """
        from django.contrib.sessions.models import Session
        out(Session.objects.all().delete()[0])
        """,
    )
    page.wait_for_url(f"**/accounts/login/?next=/executions/{pk}/", timeout=10_000)


def test_the_dead_letters_page_shows_a_run_that_gave_up_with_its_last_log_lines(page, world):
    server, db = world["server"], world["db"]
    django_shell(
        db,
        """
        from django.utils import timezone
        from scheduler.triage.dead_letters import DeadLetter
        from scheduler.models import Execution

        failed = Execution.objects.filter(state="failed").order_by("-scheduled_for").first()
        DeadLetter.objects.create(
            execution=failed, reason="failed", detail="exit code 1",
            log_tail="report: disk full\\nreport: giving up", landed_at=timezone.now(),
        )
        out(failed.pk)
        """,
    )
    log_in(page, server)
    page.click("nav >> text=Dead letters")
    page.wait_for_url("**/dead-letters/")
    row = page.locator("table.dead-letters tbody tr").first
    assert "nightly-report" in row.inner_text() and "exit code 1" in row.inner_text()
    row.locator("summary").click()
    assert "report: giving up" in row.locator("pre").inner_text()
    assert page.locator("button[data-action^=deadletter]").count() == 0  # a viewer
    screenshot(page, "dead-letters")
    assert page.problems == []
