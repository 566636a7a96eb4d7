"""A large apply keeps its write transaction short: every item is checked
and the plan made reading only, then one transaction writes; a row changed
by someone else in between is never overwritten unseen; the items of one
document are bounded."""

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError, check_document
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE)\b", re.IGNORECASE)
JOBS = 40
# The chain graph's query: every job's name and chains, nothing else.
CHAIN_GRAPH = re.compile(
    r'^SELECT "scheduler_job"."name"( AS "name")?, "scheduler_job"."on_success"'
)


def document(jobs=JOBS, command="true"):
    return {
        "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
        "jobs": [
            {
                "name": f"job-{n}",
                "schedule": f"{n % 60} 6 * * *",
                "command": f"{command} {n}",
                "calendar": "workdays",
                "on_success": [f"job-{n + 1}"] if n + 1 < jobs else [],
            }
            for n in range(jobs)
        ],
    }


def statements_from_first_write(queries):
    sqls = [q["sql"] for q in queries]
    first = next((i for i, sql in enumerate(sqls) if WRITES.match(sql)), None)
    return [] if first is None else sqls[first:]


def test_a_document_with_a_bad_item_is_refused_before_any_write():
    doc = document()
    doc["jobs"][-1]["schedule"] = "61 * * * *"

    with CaptureQueriesContext(connection) as queries, pytest.raises(ApplyError) as refused:
        applyfile.apply(doc, now=NOW)

    assert refused.value.errors[0].startswith(f"jobs[{JOBS - 1}].schedule: ")
    assert statements_from_first_write(queries.captured_queries) == []


@pytest.mark.parametrize("run", ["create", "update"])
def test_the_write_transaction_holds_a_few_statements_per_item_and_no_checks(run):
    """Every check (the chain graph, names, the calendar) runs before the
    first write: inside the transaction a job costs at most its write, its
    reschedule and its audit event, and the chain graph is read once."""
    if run == "update":
        applyfile.apply(document(), now=NOW)
        doc = document(command="echo")
    else:
        doc = document()

    with CaptureQueriesContext(connection) as queries:
        applyfile.apply(doc, now=NOW)

    inside = statements_from_first_write(queries.captured_queries)
    assert len(inside) <= 3 * JOBS + 20, len(inside)
    chain_graph_reads = [sql for sql in inside if CHAIN_GRAPH.match(sql)]
    assert len(chain_graph_reads) <= 1
    assert Job.objects.filter(next_run_at__isnull=False).count() == JOBS


def test_a_row_changed_between_the_plan_and_the_write_is_planned_again(settings):
    """Another writer changes a job after the plan read it: the write sees
    it and plans again, so the change is recorded against what was really
    stored, never overwritten unseen."""
    applyfile.apply(document(jobs=2), now=NOW)
    applier = applyfile.Applier(now=NOW, actor=("user", "ci"), source="", managed_source="")
    applier.plan(document(jobs=2, command="echo"))
    Job.objects.filter(name="job-0").update(
        command="by hand", updated_at=NOW + dt.timedelta(seconds=1)
    )

    with pytest.raises(applyfile.Conflict):
        applier.write(document(jobs=2, command="echo"), prune=False, dry_run=False)
    assert Job.objects.get(name="job-1").command == "true 1"  # nothing written

    changes = applyfile.apply(document(jobs=2, command="echo"), now=NOW)

    job_0 = next(c for c in changes if c.name == "job-0")
    assert job_0.diff == {"command": ["by hand", "echo 0"]}
    event = AuditEvent.objects.filter(action="job.changed", target_repr="job-0").get()
    assert event.data["diff"] == {"command": ["by hand", "echo 0"]}


def test_a_job_created_by_someone_else_in_between_is_a_conflict_not_an_error():
    applier = applyfile.Applier(now=NOW, actor=("user", "ci"), source="", managed_source="")
    applier.plan(document(jobs=1))
    Job.objects.create(name="job-0", schedule="0 1 * * *", command="mine")

    with pytest.raises(applyfile.Conflict):
        applier.write(document(jobs=1), prune=False, dry_run=False)

    changes = applyfile.apply(document(jobs=1), now=NOW)
    assert [(c.name, c.action) for c in changes if c.kind == "job"] == [("job-0", "update")]


@pytest.mark.parametrize(
    ("section", "limit"), [("jobs", 5_000), ("calendars", 1_000), ("concurrency_groups", 1_000)]
)
def test_a_section_past_its_bound_is_refused_naming_it(section, limit):
    doc = {section: [{"name": f"x{n}"} for n in range(limit + 1)]}

    with pytest.raises(ApplyError) as refused:
        check_document(doc)

    assert refused.value.errors == [
        f"{section}: at most {limit:,} items in one document, got {limit + 1:,}"
    ]
    assert check_document({section: doc[section][:limit]}) is not None


def test_the_api_answers_a_section_past_its_bound_with_422(client):
    api = KeyedClient(client, ["jobs:write", "calendars:write"])
    jobs = [{"name": f"j{n}", "schedule": "* * * * *", "command": "x"} for n in range(5_001)]

    answer = api.post("apply", {"jobs": jobs})

    assert answer.status_code == 422
    assert answer.json()["detail"] == "jobs: at most 5,000 items in one document, got 5,001"
    assert not Job.objects.exists()


def test_jobs_moved_onto_a_calendar_and_a_group_the_document_creates_are_written_on_them():
    applyfile.apply(document(jobs=3), now=NOW)
    moved = document(jobs=3)
    moved["calendars"].append({"name": "weekend", "weekdays": ["sat", "sun"]})
    moved["concurrency_groups"] = [{"name": "night", "max_concurrent": 1}]
    for job in moved["jobs"]:
        job.update(calendar="weekend", concurrency_group="night")

    applyfile.apply(moved, now=NOW)

    stored = Job.objects.select_related("calendar", "concurrency_group")
    assert {(j.calendar.name, j.concurrency_group.name) for j in stored} == {("weekend", "night")}
    # Sat 5 Dec 2026, 06:00 UTC: the first weekend morning after NOW.
    assert {j.next_run_at.date() for j in stored} == {dt.date(2026, 12, 5)}
