"""API keys (control.models, control.scopes): shown once, stored hashed,
scoped, expiring, revocable; runner tokens are not API keys."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError

from audit.models import AuditEvent
from control import scopes
from control.models import ApiKey, hash_secret
from projects.models import Project
from runners.models import RunnerToken
from tests.failing_check import a_failing_system_check

NOW = datetime(2026, 12, 24, 9, 0, tzinfo=UTC)


def test_scopes_are_parsed_from_words_or_lists_and_unknown_ones_named():
    assert scopes.parse("jobs:trigger jobs:read,jobs:read") == ["jobs:read", "jobs:trigger"]
    assert scopes.parse(["admin"]) == ["admin"]
    with pytest.raises(ValueError, match="unknown scope 'jobs:delete'"):
        scopes.parse("jobs:read jobs:delete")
    with pytest.raises(ValueError, match="at least one scope"):
        scopes.parse("")


def test_admin_covers_every_scope_and_a_key_never_grants_more_than_it_holds():
    assert all(scopes.covers(["admin"], scope) for scope in scopes.ALL)
    assert scopes.covers(["jobs:read"], "jobs:read")
    assert not scopes.covers(["jobs:read"], "jobs:write")
    assert scopes.within(["jobs:read"], ["jobs:read", "jobs:trigger"])
    assert scopes.within(["jobs:read", "audit:read"], ["admin"])
    assert not scopes.within(["jobs:read", "jobs:write"], ["jobs:read"])
    assert not scopes.within(["admin"], list(set(scopes.ALL) - {"admin"}))


def test_a_key_is_stored_as_a_hash_and_found_by_its_secret(db):
    key, secret = ApiKey.issue("deploy-pipeline", "jobs:write calendars:write")

    stored = ApiKey.objects.get()
    assert secret not in (stored.secret_hash, stored.name)
    assert stored.secret_hash == hash_secret(secret)
    assert stored.scopes == ["calendars:write", "jobs:write"]
    assert ApiKey.objects.authenticate(secret, NOW) == key
    assert ApiKey.objects.authenticate(secret + "x", NOW) is None
    assert ApiKey.objects.authenticate("", NOW) is None


def test_revoked_and_expired_keys_and_runner_tokens_do_not_authenticate(db):
    _, revoked = ApiKey.issue("old", ["admin"])
    ApiKey.objects.filter(name="old").update(revoked_at=NOW - timedelta(days=1))
    _, expired = ApiKey.issue("temp", ["admin"], expires_at=NOW)
    _, runner_secret = RunnerToken.issue("rack-1")
    _, live = ApiKey.issue("ci", ["jobs:read"], expires_at=NOW + timedelta(seconds=1))

    assert ApiKey.objects.authenticate(revoked, NOW) is None
    assert ApiKey.objects.authenticate(expired, NOW) is None
    assert ApiKey.objects.authenticate(runner_secret, NOW) is None
    assert RunnerToken.objects.authenticate(live) is None
    assert ApiKey.objects.authenticate(live, NOW).name == "ci"


def test_create_api_key_prints_the_key_once_and_audits_it(db):
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "ci", "--scopes", "jobs:read", "jobs:trigger",
                 "--expires-in", "90d", stdout=out, stderr=err)  # fmt: skip

    secret = out.getvalue().strip()
    key = ApiKey.objects.authenticate(secret, NOW)
    assert key.scopes == ["jobs:read", "jobs:trigger"]
    assert timedelta(days=89) < key.expires_at - key.created_at <= timedelta(days=90)
    assert "not shown again" in err.getvalue()
    event = AuditEvent.objects.get(action="apikey.created")
    assert event.data["scopes"] == ["jobs:read", "jobs:trigger"]
    assert secret not in str(event.data)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["ci", "--scopes", "jobs:destroy"], "unknown scope 'jobs:destroy'"),
        (["ci", "--scopes", "admin", "--expires-in", "soon"], "'soon' is not a duration"),
        (["", "--scopes", "admin"], "1 to 100 characters"),
        (["ci", "--scopes", "admin", "--project", "payroll"], "--project: no project named"),
        (["ci", "--scopes", "admin", "--project", "a\x00b"], "--project: no project named"),
    ],
)
def test_create_api_key_refuses_bad_input_and_creates_nothing(db, arguments, message):
    with pytest.raises(CommandError, match=message):
        call_command("create_api_key", *arguments, stdout=StringIO(), stderr=StringIO())
    assert not ApiKey.objects.exists()


def test_a_name_is_taken_once(db):
    ApiKey.issue("ci", ["admin"])
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_api_key", "ci", "--scopes", "admin", stdout=StringIO())


def test_create_api_key_binds_the_key_to_a_project(db):
    Project.objects.create(name="payroll")
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "payroll-ci", "--scopes", "jobs:read", "--project", "payroll",
                 stdout=out, stderr=err)  # fmt: skip

    key = ApiKey.objects.authenticate(out.getvalue().strip(), NOW)
    assert key.project == "payroll"
    assert "bound to project payroll" in err.getvalue()
    event = AuditEvent.objects.get(action="apikey.created")
    assert (event.project, event.data["project"]) == ("payroll", "payroll")


def test_create_api_key_makes_a_global_key_without_a_project(db):
    call_command("create_api_key", "ci", "--scopes", "admin", stdout=StringIO(), stderr=StringIO())
    assert ApiKey.objects.get(name="ci").project == ""


def test_create_api_key_mints_with_a_failing_system_check_which_stops_check(db):
    # Minting needs nothing the checks look at; `check` still stops.
    with a_failing_system_check():
        out = StringIO()
        call_command("create_api_key", "despite", "--scopes", "jobs:read", stdout=out,
                     stderr=StringIO(), skip_checks=False)  # fmt: skip
        assert ApiKey.objects.get(name="despite").secret_hash == hash_secret(out.getvalue().strip())
        with pytest.raises(SystemCheckError, match="tests.E001"):
            call_command("check")
