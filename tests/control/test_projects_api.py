"""Projects in the management API (docs/design.md §11): two projects, alpha
and beta, with a job, a calendar, a check, a run, a dead letter, a secret,
a key and an audit event each. To a key bound to alpha every beta object
is 404 with the body an unknown one gets, its lists hold alpha's rows only,
and nothing is created in or moved to beta; a global key sees both; every
answer carries "project"."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from django.db import transaction

import audit
from audit.models import AuditEvent
from calendars.models import Calendar
from checks.models import Check
from control.models import ApiKey
from projects.models import Project
from scheduler.models import Execution, Job
from scheduler.triage.dead_letters import DeadLetter
from tests.checks.factories import CheckFactory
from tests.control.calls import LAST_USED, changed, fingerprint
from tests.control.management_api import management_operations
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory, RunnerFactory
from vault import store
from vault.models import Secret

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
UNKNOWN_NAME, UNKNOWN_ID = "nowhere", 999_999


class Caller:
    """The management API as one key (its secret)."""

    def __init__(self, client, secret):
        self.client, self.secret = client, secret

    def call(self, method, path, body=None, **query):
        query = "&".join(f"{k}={v}" for k, v in query.items())
        url = f"/api/v1/{path}" + (f"?{query}" if query else "")
        headers = {"authorization": f"Bearer {self.secret}"}
        if body is None:
            return self.client.generic(method.upper(), url, headers=headers)
        return self.client.generic(
            method.upper(), url, json.dumps(body), content_type="application/json", headers=headers
        )

    def get(self, path, **query):
        return self.call("get", path, **query)

    def items(self, path, **query):
        answer = self.get(path, limit=500, **query)
        assert answer.status_code == 200, answer.content
        return answer.json()["items"]


@dataclass
class Side:
    """One project's rows."""

    job: Job
    calendar: Calendar
    check: Check
    execution: Execution
    dead_letter: DeadLetter
    secret: Secret
    key: ApiKey


def side(project):
    calendar = CalendarFactory(name=f"{project}-days", project=project)
    job = JobFactory(name=f"{project}-sync", project=project, calendar=calendar)
    execution = ExecutionFactory(job=job, state=Execution.FAILED, finished_at=T0)
    audit.record("job.paused", target=job, at=T0)
    return Side(
        job=job,
        calendar=calendar,
        check=CheckFactory(name=f"{project}-backup", project=project),
        execution=execution,
        dead_letter=DeadLetter.objects.create(execution=execution, reason="failed", landed_at=T0),
        secret=store.put(f"{project}-token", "s3cret-value", project=project, actor=None, now=T0)[
            0
        ],
        key=ApiKey.issue(f"{project}-key", ["jobs:read"], project=project)[0],
    )


@pytest.fixture
def alpha(db):
    Project.objects.create(name="alpha")
    return side("alpha")


@pytest.fixture
def beta(db):
    Project.objects.create(name="beta")
    return side("beta")


def caller(client, name, key_scopes, project=""):
    """The management API as a new key, bound to `project` or global."""
    return Caller(client, ApiKey.issue(name, key_scopes, project=project)[1])


@pytest.fixture
def bound(client, alpha, beta):
    """An admin key bound to alpha."""
    return caller(client, "alpha-admin", ["admin"], project="alpha")


@pytest.fixture
def everywhere(client, alpha, beta):
    """A global admin key."""
    return caller(client, "root", ["admin"])


# -- beta's objects are unknown to alpha's key --------------------------------


def address(operation, side):
    """The values of `operation`'s path parameters naming `side`'s object
    of the resource the path is under (None: another resource)."""
    value = {
        "jobs": lambda: side.job.name,
        "calendars": lambda: side.calendar.name,
        "checks": lambda: side.check.name,
        "keys": lambda: side.key.name,
        "secrets": lambda: side.secret.name,
        "executions": lambda: side.execution.pk,
        "dead-letters": lambda: side.dead_letter.pk,
    }.get(operation.resource)
    if value is None or not operation.parameters:
        return None
    return {parameter: value() for parameter in operation.parameters}


def unknown(values):
    return {k: UNKNOWN_ID if isinstance(v, int) else UNKNOWN_NAME for k, v in values.items()}


BODIES = {"backfill": {"start": "2026-05-01", "end": "2026-05-02"}}


def body_for(operation):
    if operation.method not in ("POST", "PUT", "PATCH"):
        return None
    return BODIES.get(operation.path.rsplit("/", 1)[-1], {})


ADDRESSED = [
    operation
    for operation in management_operations()
    # PUT of a calendar no one has creates it: its own test below.
    if operation.resource in ("jobs", "calendars", "checks", "keys", "secrets", "executions",
                              "dead-letters")
    and operation.parameters
    and (operation.method, operation.resource) != ("PUT", "calendars")
]  # fmt: skip


def answered(bound, operation, values):
    """(status, body) of the call, rolled back: each call meets the same world."""
    with transaction.atomic():
        path = operation.url(values).removeprefix("/api/v1/")
        answer = bound.call(operation.method, path, body_for(operation))
        transaction.set_rollback(True)
    return answer.status_code, answer.content.decode()


@pytest.mark.parametrize("operation", ADDRESSED, ids=str)
def test_another_projects_object_answers_as_an_unknown_one(bound, beta, operation):
    values = address(operation, beta)
    before = fingerprint(ignore={LAST_USED})

    status, body = answered(bound, operation, values)
    as_unknown = answered(bound, operation, unknown(values))

    [value] = set(values.values())
    assert (status, str(value) in body) == (404, True), body
    assert (status, body.replace(str(value), str(UNKNOWN_ID if isinstance(value, int) else
                                                  UNKNOWN_NAME))) == as_unknown  # fmt: skip
    assert changed(before, fingerprint(ignore={LAST_USED})) == {}


def test_the_matrix_walks_every_kind_of_object(bound):
    assert {operation.resource for operation in ADDRESSED} == {
        "jobs", "calendars", "checks", "keys", "secrets", "executions", "dead-letters",
    }  # fmt: skip


def test_its_own_projects_objects_answer(bound, alpha):
    for path in [
        f"jobs/{alpha.job.name}",
        f"calendars/{alpha.calendar.name}",
        f"checks/{alpha.check.name}",
        f"executions/{alpha.execution.pk}",
        f"dead-letters/{alpha.dead_letter.pk}",
    ]:
        answer = bound.get(path)
        assert answer.status_code == 200, (path, answer.content)
        assert answer.json()["project"] == "alpha"


# -- lists ---------------------------------------------------------------------

LISTS = ["jobs", "calendars", "checks", "executions", "keys", "audit"]


@pytest.mark.parametrize("path", LISTS)
def test_a_bound_keys_lists_hold_its_projects_rows_only(bound, path):
    assert {item["project"] for item in bound.items(path)} == {"alpha"}


def test_a_bound_keys_dead_letters_and_secrets_are_its_projects(bound):
    assert {d["project"] for d in bound.items("dead-letters", status="all")} == {"alpha"}
    assert [s["name"] for s in bound.items("secrets")] == ["alpha-token"]
    assert bound.get("secrets", project="beta").json() == {
        "detail": "project: no project named 'beta'"
    }


def test_a_filter_naming_another_project_selects_nothing(bound):
    for path in ["jobs", "calendars", "checks", "audit"]:
        assert bound.items(path, project="beta") == []


@pytest.mark.parametrize("path", [*LISTS, "dead-letters?status=all"])
def test_a_global_key_sees_every_project(everywhere, path):
    path, _, query = path.partition("?")
    items = everywhere.items(path, **dict([query.split("=")] if query else []))
    assert {item["project"] for item in items} >= {"alpha", "beta"}


def test_a_global_key_filters_a_list_by_project(everywhere):
    assert [job["name"] for job in everywhere.items("jobs", project="beta")] == ["beta-sync"]
    assert [s["name"] for s in everywhere.items("secrets", project="beta")] == ["beta-token"]
    [event] = everywhere.items("audit", project="beta", action="job.")
    assert (event["action"], event["target_repr"]) == ("job.paused", "beta-sync")


def test_a_bound_key_keeps_the_events_of_its_deleted_rows(bound, alpha):
    assert bound.call("delete", f"jobs/{alpha.job.name}").status_code == 204
    actions = [e["action"] for e in bound.items("audit", target=alpha.job.name)]
    assert actions == ["job.deleted", "job.paused"]


def test_the_forecast_names_to_a_bound_key_only_its_skipped_jobs(bound, alpha, beta):
    Job.objects.filter(pk__in=[alpha.job.pk, beta.job.pk]).update(schedule="not a schedule")
    answer = bound.call("get", "forecast")
    assert answer.status_code == 200, answer.content
    assert list(answer.json()["skipped"]) == ["alpha-sync"]


# -- writes ---------------------------------------------------------------------

JOB = {"name": "report", "schedule": "0 6 * * *", "command": "./report"}
CHECK = {"name": "heartbeat", "period": 3600}


def written(caller, method, path, body):
    """(status, body, whether anything but the key's last use changed)."""
    before = fingerprint(ignore={LAST_USED})
    answer = caller.call(method, path, body)
    return answer.status_code, answer.json(), bool(changed(before, fingerprint(ignore={LAST_USED})))


WRITES = [
    ("post", "jobs", JOB),
    ("patch", "jobs/alpha-sync", {}),
    ("post", "checks", CHECK),
    ("patch", "checks/alpha-backup", {}),
    ("put", "calendars/alpha-days", {"weekdays": ["mon"]}),
    ("put", "calendars/new-days", {"weekdays": ["mon"]}),
    ("post", "secrets", {"name": "db-password", "value": "s3cret-value"}),
    ("post", "keys", {"name": "child", "scopes": ["jobs:read"]}),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
@pytest.mark.parametrize("project", ["beta", "nowhere"])
def test_a_bound_key_writes_nothing_into_another_project(bound, method, path, body, project):
    status, answer, any_change = written(bound, method, path, {**body, "project": project})
    assert (status, answer, any_change) == (
        404, {"detail": f"project: no project named {project!r}"}, False,
    )  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_a_global_key_is_told_of_an_unknown_project_naming_the_field(
    everywhere, method, path, body
):
    status, answer, any_change = written(everywhere, method, path, {**body, "project": "nowhere"})
    assert (status, answer, any_change) == (
        422, {"detail": "project: no project named 'nowhere'"}, False,
    )  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body"), [w for w in WRITES if w[1] != "keys"])
def test_a_bound_key_writes_in_its_project_without_naming_it(bound, method, path, body):
    answer = bound.call(method, path, body)
    assert answer.status_code in (200, 201), answer.content
    assert answer.json()["project"] == "alpha"


def test_a_global_key_creates_in_default_or_where_it_says(everywhere):
    assert everywhere.call("post", "jobs", JOB).json()["project"] == "default"
    made = everywhere.call("post", "checks", {**CHECK, "project": "beta"})
    assert (made.status_code, made.json()["project"]) == (201, "beta")
    assert Check.objects.get(name="heartbeat").project == "beta"


def test_a_bound_keys_new_job_is_audited_in_its_project(bound):
    assert bound.call("post", "jobs", JOB).status_code == 201
    assert Job.objects.get(name="report").project == "alpha"
    event = AuditEvent.objects.get(action="job.created", target_repr="report")
    assert event.project == "alpha"
    assert "job.created" in [e["action"] for e in bound.items("audit", target="report")]


def test_a_global_key_moves_a_job_and_the_move_is_audited(everywhere, bound, alpha):
    answer = everywhere.call("patch", f"jobs/{alpha.job.name}", {"project": "beta"})
    assert (answer.status_code, answer.json()["project"]) == (200, "beta")
    event = AuditEvent.objects.filter(action="job.changed").latest("id")
    assert (event.project, event.data["diff"]["project"]) == ("beta", ["alpha", "beta"])
    assert bound.get(f"jobs/{alpha.job.name}").status_code == 404
    assert bound.get(f"executions/{alpha.execution.pk}").status_code == 404


def test_a_global_key_moves_a_calendar_and_a_check(everywhere, alpha):
    calendar = everywhere.call("put", f"calendars/{alpha.calendar.name}", {"project": "beta"})
    check = everywhere.call("patch", f"checks/{alpha.check.name}", {"project": "beta"})
    assert (calendar.status_code, calendar.json()["project"]) == (200, "beta")
    assert (check.status_code, check.json()["project"]) == (200, "beta")
    assert Calendar.objects.get(pk=alpha.calendar.pk).project == "beta"


def test_a_put_of_another_projects_calendar_answers_as_a_get_does(bound, beta):
    before = fingerprint(ignore={LAST_USED})
    put = bound.call("put", f"calendars/{beta.calendar.name}", {"weekdays": ["mon"]})
    assert (put.status_code, put.json()) == (
        404,
        bound.get(f"calendars/{beta.calendar.name}").json(),
    )
    assert changed(before, fingerprint(ignore={LAST_USED})) == {}


# -- keys ------------------------------------------------------------------------


def test_a_bound_key_mints_keys_bound_to_its_project_only(bound):
    made = bound.call("post", "keys", {"name": "child", "scopes": ["jobs:read"]})
    assert (made.status_code, made.json()["project"]) == (201, "alpha")
    assert ApiKey.objects.get(name="child").project == "alpha"
    again = bound.call(
        "post", "keys", {"name": "child2", "scopes": ["jobs:read"], "project": "alpha"}
    )
    assert (again.status_code, again.json()["project"]) == (201, "alpha")


def test_a_global_key_mints_global_or_bound_keys(everywhere):
    plain = everywhere.call("post", "keys", {"name": "ci", "scopes": ["jobs:read"]})
    tied = everywhere.call("post", "keys", {"name": "ci-beta", "scopes": ["jobs:read"],
                                             "project": "beta"})  # fmt: skip
    assert (plain.status_code, plain.json()["project"]) == (201, None)
    assert (tied.status_code, tied.json()["project"]) == (201, "beta")
    event = AuditEvent.objects.get(action="apikey.created", target_repr="ci-beta")
    assert (event.project, event.data["project"]) == ("beta", "beta")


def test_a_bound_key_lists_and_revokes_its_projects_keys_only(bound, everywhere, alpha, beta):
    assert {k["name"] for k in bound.items("keys")} == {"alpha-key", "alpha-admin"}
    assert bound.call("delete", f"keys/{beta.key.name}").status_code == 404
    assert bound.call("delete", "keys/root").status_code == 404  # a global key
    assert bound.call("delete", f"keys/{alpha.key.name}").status_code == 204
    assert ApiKey.objects.get(pk=alpha.key.pk).revoked_at is not None
    assert ApiKey.objects.get(pk=beta.key.pk).revoked_at is None


def test_revoking_a_bound_key_revokes_the_keys_it_minted(client, bound, everywhere):
    minted = bound.call("post", "keys", {"name": "child", "scopes": ["admin"]})
    child = Caller(client, minted.json()["key"])
    grandchild = child.call("post", "keys", {"name": "grandchild", "scopes": ["jobs:read"]})
    assert grandchild.json()["project"] == "alpha"
    assert everywhere.call("delete", "keys/alpha-admin").status_code == 204
    assert set(ApiKey.objects.filter(revoked_at__isnull=False).values_list("name", flat=True)) == {
        "alpha-admin",
        "child",
        "grandchild",
    }


# -- apply ---------------------------------------------------------------------------


def test_a_bound_key_applies_a_document_into_its_project(bound):
    answer = bound.call("post", "apply", {"jobs": [JOB]})
    assert answer.status_code == 200, answer.content
    assert Job.objects.get(name="report").project == "alpha"


@pytest.mark.parametrize(
    ("document", "error"),
    [
        ({"project": "beta", "jobs": [JOB]}, "project: no project named 'beta'"),
        ({"jobs": [{**JOB, "project": "beta"}]}, "jobs[0].project: no project named 'beta'"),
        ({"jobs": [{**JOB, "name": "beta-sync"}]}, "jobs[0].name: 'beta-sync' is taken"),
    ],
)
def test_a_bound_key_applies_nothing_of_another_project(bound, document, error):
    before = fingerprint(ignore={LAST_USED})
    answer = bound.call("post", "apply", document)
    assert answer.status_code == 422, answer.content
    assert error in answer.json()["detail"]
    assert changed(before, fingerprint(ignore={LAST_USED})) == {}


# -- the whole install's: runners, maintenance ---------------------------------------


def test_a_bound_key_reads_runners_and_maintenance_but_needs_a_global_key_to_change_them(bound):
    runner = RunnerFactory(name="rack-1")
    assert bound.get("runners").status_code == 200
    assert bound.get("maintenance").status_code == 200
    before = fingerprint(ignore={LAST_USED})
    for method, path, body in [
        ("post", f"runners/{runner.pk}/drain", None),
        ("post", f"runners/{runner.pk}/resume", None),
        ("post", f"runners/{runner.pk}/forget", None),
        ("put", "maintenance", {"on": True}),
    ]:
        answer = bound.call(method, path, body)
        assert answer.status_code == 403, (path, answer.content)
        assert "needs a global key" in answer.json()["detail"]
    assert changed(before, fingerprint(ignore={LAST_USED})) == {}


def test_a_global_key_drains_a_runner(everywhere):
    runner = RunnerFactory(name="rack-1")
    assert everywhere.call("post", f"runners/{runner.pk}/drain").status_code == 200
