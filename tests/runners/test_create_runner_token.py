import io

import pytest
from django.core.management import CommandError, call_command

from runners.models import RunnerToken


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
