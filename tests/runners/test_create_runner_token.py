import io

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError

from runners.models import RunnerToken
from tests.failing_check import a_failing_system_check


def test_it_prints_the_secret_once_and_stores_a_hash(db):
    out, err = io.StringIO(), io.StringIO()
    call_command("create_runner_token", "build-farm", stdout=out, stderr=err)
    secret = out.getvalue().strip()
    assert secret.startswith("crq_")
    token = RunnerToken.objects.get(name="build-farm")
    assert RunnerToken.objects.authenticate(secret) == token
    assert secret not in token.secret_hash
    assert "not shown again" in err.getvalue()


def test_a_duplicate_name_is_refused(db):
    call_command("create_runner_token", "twice", stdout=io.StringIO(), stderr=io.StringIO())
    with pytest.raises(CommandError, match="exists already"):
        call_command("create_runner_token", "twice", stdout=io.StringIO())
    assert RunnerToken.objects.count() == 1


def test_the_creation_is_audited_without_the_secret(db):
    from audit.models import AuditEvent

    out = io.StringIO()
    call_command("create_runner_token", "audited", stdout=out, stderr=io.StringIO())
    event = AuditEvent.objects.get(action="runnertoken.created")
    assert event.target_repr == "audited"
    assert out.getvalue().strip() not in str(event.data)


def test_it_mints_with_a_failing_system_check_which_stops_check(db):
    # Minting needs nothing the checks look at; `check` still stops.
    with a_failing_system_check():
        out = io.StringIO()
        call_command("create_runner_token", "despite", stdout=out, stderr=io.StringIO(),
                     skip_checks=False)  # fmt: skip
        assert RunnerToken.objects.authenticate(out.getvalue().strip()).name == "despite"
        with pytest.raises(SystemCheckError, match="tests.E001"):
            call_command("check")
