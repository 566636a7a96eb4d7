"""Every dashboard page and every read call of the management API, over the
README's apply examples and an `@business_day` job on a holiday calendar
with a daily window: none answers 5xx, and none shows a secret-looking env
value.

The world is built the way an operator builds it (the README's YAML blocks
through `apply`, as the docs say), so a page that breaks on what the docs
tell people to write fails here. The URLs are walked from `dashboard.urls`
and from the NinjaAPI's routes, so pages and calls added later are covered.
"""

import datetime as dt
import re
from pathlib import Path

import pytest
import time_machine
import yaml
from django.urls import URLPattern, reverse

from checks import pings, states
from checks.models import Check
from control.models import ApiKey
from runners.models import Runner
from scheduler.apply.document import apply
from scheduler.models import Execution, Job, LogChunk
from scheduler.triage.dead_letters import DeadLetter
from tests.control.management_api import management_operations
from vault import store

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 7, 10, 0, tzinfo=dt.UTC)
SECRET = "hunter2-payroll"
README = Path(__file__).resolve().parents[2] / "README.md"

# On top of the README: a job counting business days on a calendar with
# holidays and a daily window (the forecast wraps such a calendar).
PAYROLL = {
    "calendars": [
        {
            "name": "de-office-hours",
            "timezone": "Europe/Berlin",
            "weekdays": ["mon", "tue", "wed", "thu", "fri"],
            "holidays": {"country": "DE", "subdivision": "BY"},
            "daily_window": {"start": "08:00", "end": "18:00"},
        }
    ],
    "jobs": [
        {
            "name": "payroll",
            "schedule": "@business_day 3 09:00",
            "timezone": "Europe/Berlin",
            "command": "python payroll.py",
            "calendar": "de-office-hours",
            "env": {"PAYROLL_DB_PASSWORD": SECRET},
            "labels": ["linux"],
        }
    ],
    # Checks, one of each timing, a ping with a log: the check pages.
    "checks": [
        {"name": "payroll-export", "schedule": "0 6 * * 1-5", "timezone": "Europe/Berlin"},
        {"name": "heartbeat", "period": "5m", "grace": "1m"},
    ],
}


def readme_apply_documents():
    """The calendars and jobs of the README's YAML blocks that are apply
    documents, as the README shows them. Their channels and rules are left
    out: the pages read jobs, and the notifications tests check those."""
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), re.S)
    documents = [yaml.safe_load(block) for block in blocks]
    return [
        {key: d[key] for key in ("calendars", "jobs") if key in d}
        for d in documents
        if isinstance(d, dict) and ("jobs" in d or "calendars" in d)
    ]


@pytest.fixture
def world():
    """The README's examples and payroll applied, a runner that ran them, a
    run that gave up (a dead letter with a log)."""
    documents = readme_apply_documents()
    assert documents, "the README shows no apply document"
    # The secrets the README's jobs name, set as its Secrets section says.
    for name in set(re.findall(r"\$\{secret:([^}]+)\}", README.read_text())):
        store.put(name, f"{name}-value", actor=None, now=NOW)
    for document in documents:
        apply(document, now=NOW, source="README.md")
    apply(PAYROLL, now=NOW, source="payroll.yaml")
    runner = Runner.objects.create(
        name="web-1", labels=["linux"], session="s1", registered_at=NOW, last_seen_at=NOW
    )
    for job in Job.objects.all():
        Execution.objects.create(
            job=job,
            scheduled_for=NOW - dt.timedelta(hours=1),
            run_after=NOW - dt.timedelta(hours=1),
            created_at=NOW - dt.timedelta(hours=1),
            state=Execution.SUCCEEDED,
            runner=runner,
            claimed_at=NOW - dt.timedelta(hours=1),
            finished_at=NOW - dt.timedelta(minutes=59),
            exit_code=0,
        )
    failed = Execution.objects.create(
        job=Job.objects.get(name="payroll"),
        scheduled_for=NOW - dt.timedelta(minutes=30),
        run_after=NOW - dt.timedelta(minutes=30),
        created_at=NOW - dt.timedelta(minutes=30),
        state=Execution.FAILED,
        runner=runner,
        exit_code=1,
    )
    LogChunk.objects.create(execution=failed, seq=0, data="connection refused\n")
    DeadLetter.objects.create(
        execution=failed, reason=DeadLetter.FAILED, detail="exit 1", landed_at=NOW
    )
    heartbeat = Check.objects.get(name="heartbeat")
    for kind, body in ((states.START, b""), (states.FAIL, b"\xff<b>not text</b>\x1b[0m")):
        pings.record(pings.Received(token=heartbeat.token, kind=kind, at=NOW, body=body))
    return {
        "jobs": sorted(Job.objects.values_list("name", flat=True)),
        "executions": sorted(Execution.objects.values_list("pk", flat=True)),
        "runners": [runner.pk],
        "dead-letters": sorted(DeadLetter.objects.values_list("pk", flat=True)),
        "calendars": sorted(
            {c["name"] for d in [PAYROLL, *documents] for c in d.get("calendars") or []}
        ),
        "checks": sorted(Check.objects.values_list("name", flat=True)),
    }


def dashboard_urls(world):
    """Every URL of dashboard.urls, once per real name or id it takes."""
    from dashboard.urls import app_name, urlpatterns

    urls = []
    for pattern in urlpatterns:
        assert isinstance(pattern, URLPattern)
        route = str(pattern.pattern)
        name = f"{app_name}:{pattern.name}"
        if "<slug:name>" in route:
            named = world["checks"] if route.startswith("checks/") else world["jobs"]
            urls += [reverse(name, args=[value]) for value in named]
        elif "<int:pk>" in route:
            urls += [reverse(name, args=[value]) for value in world[route.split("/")[0]]]
        else:
            urls.append(reverse(name))
    return urls


def api_urls(world):
    """Every GET call of the management API, once per real name or id."""
    values = {
        "execution_id": world["executions"],
        "dead_letter_id": world["dead-letters"],
        "runner_id": world["runners"],
    }
    urls = []
    for operation in management_operations():
        if operation.method != "GET":
            continue
        (parameter, *more) = operation.parameters or [None]
        assert not more, operation
        if parameter is None:
            urls.append(operation.path)
            continue
        found = world[operation.resource] if parameter == "name" else values[parameter]
        urls += [operation.url({parameter: value}) for value in found]
    return urls


@pytest.fixture
def viewer(client, world):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("viewer", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client.force_login(user)
    return client


def test_every_dashboard_page_answers_without_a_server_error(viewer, world):
    urls = dashboard_urls(world)
    assert reverse("dashboard:capacity") in urls

    with time_machine.travel(NOW, tick=False):
        answers = {url: viewer.get(url) for url in urls}

    assert {url: a.status_code for url, a in answers.items() if a.status_code >= 500} == {}
    assert [url for url, a in answers.items() if SECRET.encode() in a.content] == []
    assert answers[reverse("dashboard:capacity")].status_code == 200
    assert answers[reverse("dashboard:job", args=["payroll"])].status_code == 200
    assert answers[reverse("dashboard:check", args=["heartbeat"])].status_code == 200
    # A viewer never sees a ping URL's token (a credential).
    tokens = [token.encode() for token in Check.objects.values_list("token", flat=True)]
    assert [url for url, a in answers.items() if any(t in a.content for t in tokens)] == []


def test_every_read_call_of_the_api_answers_without_a_server_error(client, world):
    _, secret = ApiKey.issue("smoke", ["admin"])
    urls = api_urls(world)
    assert "/api/v1/forecast" in urls and "/api/v1/jobs/payroll/next" in urls

    with time_machine.travel(NOW, tick=False):
        answers = {url: client.get(url, HTTP_AUTHORIZATION=f"Bearer {secret}") for url in urls}

    assert {url: a.status_code for url, a in answers.items() if a.status_code != 200} == {}
    assert [url for url, a in answers.items() if SECRET.encode() in a.content] == []
