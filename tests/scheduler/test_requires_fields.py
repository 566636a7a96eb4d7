"""`requires`, `requires_policy` and `requires_timeout` in the apply file, the
export, the management API, the admin and the dashboard (docs/design.md
§14): bad values and cycles (with chains too) are refused naming the field
and change nothing; a waiting run's job page says what it waits for."""

import datetime as dt

import pytest
import time_machine
from django.urls import reverse

from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.apply.export import export
from scheduler.firing import ticks
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.control.keyed_client import KeyedClient
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 8, 0, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def item(name, **fields):
    return {"name": name, "schedule": "30 8 * * *", "command": "true", **fields}


def needs(job, within="2h"):
    return [{"job": job, "succeeded_within": within}]


def test_apply_stores_requirements_in_seconds_and_the_export_writes_them_back():
    document = {
        "jobs": [
            item("report", requires=needs("import", "2h"), requires_policy="skip"),
            item("import", requires_timeout="30m"),
        ]
    }
    applyfile.apply(document, now=NOW)
    report = Job.objects.get(name="report")
    assert report.requires == [{"job": "import", "succeeded_within": 7200}]
    assert (report.requires_policy, report.requires_timeout) == ("skip", 3600)
    exported = export().document
    [written] = [j for j in exported["jobs"] if j["name"] == "report"]
    assert written["requires"] == [{"job": "import", "succeeded_within": 7200}]
    assert "requires_timeout" not in written  # its default
    changes = applyfile.apply(exported, now=NOW)
    assert {change.action for change in changes} == {"unchanged"}


@pytest.mark.parametrize(
    "jobs, error",
    [
        ([item("a", requires=needs("nope"))], "jobs[0].requires[0].job: no job named 'nope'"),
        ([item("a", requires="import")], "jobs[0].requires: expected a list"),
        (
            [item("a", requires=[{"job": f"j{n}", "succeeded_within": 60} for n in range(21)])],
            "jobs[0].requires: at most 20 jobs, got 21",
        ),
        ([item("a", requires=[{"job": "a"}])], "jobs[0].requires[0].succeeded_within: required"),
        (
            [item("a", requires=[{"job": "b", "succeeded_within": "soon"}]), item("b")],
            "jobs[0].requires[0].succeeded_within: 'soon' is not a duration",
        ),
        (
            [item("a", requires=[{"job": "b", "succeeded_within": "400d"}]), item("b")],
            "jobs[0].requires[0].succeeded_within: at most 31622400 seconds",
        ),
        (
            [item("a", requires=[{"job": "b", "succeeded_within": 60, "x": 1}]), item("b")],
            "jobs[0].requires[0]: unknown field(s): x",
        ),
        ([item("a", requires=needs("b") + needs("b")), item("b")], "jobs[0].requires[1].job:"),
        ([item("a", requires_policy="later")], "jobs[0].requires_policy:"),
        ([item("a", requires_timeout="8d")], "jobs[0].requires_timeout: at most 604800"),
        (
            [item("a", requires=needs("b")), item("b", requires=needs("a"))],
            "jobs[0].requires[0].job: requirements form a cycle: a -> b -> a",
        ),
        ([item("a", requires=needs("a"))], "jobs[0].requires[0].job: requirements form a cycle"),
        (
            [item("a", requires=needs("b")), item("b"), item("c", on_success=["b"])]
            + [item("d")],  # a, b, c: no cycle; the next case closes one through a chain
            None,
        ),
        (
            [item("a", requires=needs("b"), on_success=["b"]), item("b")],
            "jobs[0].requires[0].job: chains and requirements form a cycle: a -> b -> a",
        ),
    ],
)
def test_apply_refuses_bad_requirements_and_cycles_naming_the_field(jobs, error):
    if error is None:
        applyfile.apply({"jobs": jobs}, now=NOW)
        return
    with pytest.raises(ApplyError) as refused:
        applyfile.apply({"jobs": jobs}, now=NOW)
    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors
    assert not Job.objects.exists()


def test_a_requirement_closing_a_cycle_with_a_stored_chain_is_refused():
    """import's success starts report, which requires import: the order they
    run in. import requiring report too would close a cycle."""
    chained = item("import", on_success=["report"])
    applyfile.apply({"jobs": [chained, item("report", requires=needs("import"))]}, now=NOW)
    with pytest.raises(ApplyError) as refused:
        applyfile.apply({"jobs": [{**chained, "requires": needs("report")}]}, now=NOW)
    # Both of its own edges close it: each field is named.
    assert refused.value.errors == [
        f"jobs[0].{field}: chains and requirements form a cycle: "
        "import -> report -> import (each must run before the next)"
        for field in ("on_success", "requires[0].job")
    ]
    assert Job.objects.get(name="import").requires == []


def test_the_api_takes_requirements_and_refuses_a_cycle_naming_the_field(client):
    api = KeyedClient(client, ["jobs:read", "jobs:write"])
    assert api.post("jobs", item("import")).status_code == 201
    created = api.post("jobs", item("report", requires=needs("import"), requires_policy="fail"))
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["requires"] == [{"job": "import", "succeeded_within": 7200}]
    assert (body["requires_policy"], body["requires_timeout"]) == ("fail", 3600)

    answer = api.patch("jobs/import", {"requires": needs("report")})
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("requires[0].job: requirements form a cycle")
    assert Job.objects.get(name="import").requires == []


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_superuser("ops", "ops@example.com", "pw")
    client.force_login(user)
    return client


def admin_rows(*rows):
    return {
        "requires__name": [job for job, _ in rows] + [""],
        "requires__value": [within for _, within in rows] + [""],
    }


def test_the_admin_edits_requirements_as_rows_and_refuses_a_cycle(staff):
    JobFactory(name="import")
    add = reverse("admin:scheduler_job_add")
    answer = staff.post(add, job_form(**admin_rows(("import", "90m")), requires_policy="skip"))
    assert answer.status_code == 302, answer.content.decode()[:3000]
    report = Job.objects.get(name="report")
    assert report.requires == [{"job": "import", "succeeded_within": 5400}]
    page = staff.get(reverse("admin:scheduler_job_change", args=[report.pk])).content.decode()
    assert 'value="import"' in page and 'value="5400"' in page

    upstream = Job.objects.get(name="import")
    form = job_form(name="import", **admin_rows(("report", "1h")))
    answer = staff.post(reverse("admin:scheduler_job_change", args=[upstream.pk]), form)
    assert answer.status_code == 200
    assert "requires[0].job: requirements form a cycle: import -&gt; report -&gt; import" in (
        answer.content.decode()
    )
    upstream.refresh_from_db()
    assert upstream.requires == []


def test_the_job_page_shows_what_a_waiting_run_waits_for(staff):
    JobFactory(name="import", next_run_at=None)
    report = JobFactory(name="report", next_run_at=NOW, requires=needs("import", 7200))
    ticks.trigger_due(NOW)
    page = staff.get(reverse("dashboard:job", args=["report"])).content.decode()
    assert "data-requirements-waiting" in page
    assert "1 run waiting for report's requirements" in page
    assert "import to succeed (a success since" in page
    assert "import succeeded within 2.0 h" in page
    assert report.executions.get().state == "queued"
