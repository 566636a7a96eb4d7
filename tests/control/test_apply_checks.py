"""`POST /api/v1/apply` with checks: they need checks:write (as the checks
API asks), for the section, a dry run and a prune that would delete them;
the answer never holds a check's token."""

import pytest

from audit.models import AuditEvent
from checks.models import Check
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

JOBS = [{"name": "report", "schedule": "30 2 * * *", "command": "true"}]
CHECKS = [{"name": "backup", "schedule": "0 3 * * *", "grace": "30m"}]
JOBS_AND_CALENDARS = ["jobs:write", "calendars:write"]


def snapshot():
    return [list(model.objects.order_by("pk").values()) for model in (Job, Check, AuditEvent)]


@pytest.mark.parametrize(
    "document",
    [{"jobs": JOBS, "checks": CHECKS}, {"checks": CHECKS}, {"jobs": JOBS, "checks": []}],
    ids=["with-jobs", "checks-only", "empty-checks"],
)
@pytest.mark.parametrize("dry_run", ["false", "true"])
def test_checks_need_checks_write(client, document, dry_run):
    api = KeyedClient(client, [*JOBS_AND_CALENDARS, "checks:read"])
    before = snapshot()

    answer = api.post("apply", document, dry_run=dry_run)

    assert (answer.status_code, answer.json()) == (403, {"detail": "needs scope checks:write"})
    assert snapshot() == before


@pytest.mark.parametrize("key_scopes", [[*JOBS_AND_CALENDARS, "checks:write"], ["admin"]])
def test_a_key_with_checks_write_or_admin_applies_them_and_never_sees_a_token(client, key_scopes):
    answer = KeyedClient(client, key_scopes).post("apply", {"jobs": JOBS, "checks": CHECKS})

    assert answer.status_code == 200, answer.content
    check = Check.objects.get()
    assert (check.managed_by, check.managed_source, check.grace) == ("apply", "api", 1800)
    [change] = [c for c in answer.json()["changes"] if c["kind"] == "check"]
    assert (change["action"], change["name"]) == ("create", "backup")
    assert "token" not in change["diff"] and check.token not in answer.content.decode()


def test_a_document_without_them_needs_no_checks_scope(client):
    answer = KeyedClient(client, JOBS_AND_CALENDARS).post("apply", {"jobs": JOBS}, prune="true")
    assert answer.status_code == 200, answer.content


def test_a_prune_that_would_delete_checks_needs_checks_write(client):
    writer = KeyedClient(client, [*JOBS_AND_CALENDARS, "checks:write"], name="ops")
    assert writer.post("apply", {"checks": CHECKS}, source="croniq").status_code == 200
    jobs_only = KeyedClient(client, JOBS_AND_CALENDARS, name="deploy")
    before = snapshot()

    pruning = jobs_only.post("apply", {"jobs": JOBS}, prune="true", source="croniq")

    assert (pruning.status_code, pruning.json()) == (403, {"detail": "needs scope checks:write"})
    assert snapshot() == before
    other = jobs_only.post("apply", {"jobs": JOBS}, prune="true", source="elsewhere")
    assert other.status_code == 200
    assert Check.objects.exists()
    assert writer.post("apply", {"jobs": JOBS}, prune="true", source="croniq").status_code == 200
    assert not Check.objects.exists()


def test_a_bad_check_is_422_naming_the_item_and_field(client):
    document = {"jobs": JOBS, "checks": [*CHECKS, {"name": "x", "period": "often"}]}
    answer = KeyedClient(client, ["admin"]).post("apply", document)
    assert answer.status_code == 422
    assert answer.json()["detail"].startswith("checks[1].period: 'often' is not a duration")
    assert not Job.objects.exists() and not Check.objects.exists()
