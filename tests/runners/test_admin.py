import re

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from runners.models import Runner, RunnerToken
from scheduler.models import Execution
from tests.factories import RunnerFactory
from tests.runners.conftest import NOW, pending


@pytest.fixture
def runner(token):
    return RunnerFactory(name="build-7", token=token, labels=["linux", "gpu"])


def act(admin_client, model, action, objects):
    url = reverse(f"admin:runners_{model}_changelist")
    data = {"action": action, "_selected_action": [o.pk for o in objects]}
    return admin_client.post(url, data, follow=True)


def test_the_runner_list_shows_state_labels_takeovers_and_a_flapping_badge(admin_client, runner):
    Runner.objects.filter(pk=runner.pk).update(flapping=True, flapping_since=NOW, takeover_count=9)
    page = admin_client.get(reverse("admin:runners_runner_changelist"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "build-7" in html
    assert "linux, gpu" in html
    assert ">flapping</span>" in html
    assert ">online</span>" in html


def test_drain_and_resume_actions_change_state_and_are_audited(admin_client, runner):
    page = act(admin_client, "runner", "drain", [runner])
    assert "1 runner(s) draining" in page.content.decode()
    assert Runner.objects.get(pk=runner.pk).state == Runner.DRAINING
    act(admin_client, "runner", "resume", [runner])
    assert Runner.objects.get(pk=runner.pk).state == Runner.ONLINE
    events = AuditEvent.objects.filter(target_id=str(runner.pk)).order_by("id")
    assert [(e.action, e.actor_kind) for e in events] == [
        ("runner.drained", "user"),
        ("runner.resumed", "user"),
    ]


def test_forget_releases_the_runners_executions_and_removes_it(admin_client, runner):
    execution = pending()
    Execution.objects.filter(pk=execution.pk).update(
        state=Execution.RUNNING, runner=runner, session=runner.session, lease=1
    )
    page = act(admin_client, "runner", "forget", [runner])
    assert "1 runner(s) forgotten, 1 execution(s) released" in page.content.decode()
    execution.refresh_from_db()
    assert (execution.state, execution.lost_reason) == (Execution.LOST, "runner_forgotten")
    assert not Runner.objects.filter(pk=runner.pk).exists()


def test_runners_cannot_be_added_or_deleted_by_hand(admin_client, runner):
    assert admin_client.get(reverse("admin:runners_runner_add")).status_code == 403
    delete = reverse("admin:runners_runner_delete", args=[runner.pk])
    assert admin_client.get(delete).status_code == 403


def test_creating_a_token_shows_its_secret_once_and_stores_only_a_hash(admin_client):
    page = admin_client.post(
        reverse("admin:runners_runnertoken_add"), {"name": "ci-runners"}, follow=True
    )
    html = page.content.decode()
    assert "Its secret is shown only now" in html
    [secret] = re.findall(r'id="shown-once"[^>]*>(crq_[^<]+)<', html)
    token = RunnerToken.objects.get(name="ci-runners")
    assert secret not in token.secret_hash
    assert RunnerToken.objects.authenticate(secret) == token
    created = AuditEvent.objects.get(action="runnertoken.created")
    assert secret not in str(created.data)
    # The change page never shows it again.
    change = admin_client.get(reverse("admin:runners_runnertoken_change", args=[token.pk]))
    assert secret not in change.content.decode()


def test_revoking_a_token_refuses_it_and_frees_its_names(admin_client, runner, issued):
    token, secret = issued
    page = act(admin_client, "runnertoken", "revoke", [token])
    assert "1 token(s) revoked" in page.content.decode()
    assert RunnerToken.objects.authenticate(secret) is None
    assert Runner.objects.get(pk=runner.pk).token is None
