"""apply and the job admin warn, and still save, when no runner ever
registered carries a job's labels."""

import json
from datetime import UTC, datetime
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.urls import reverse

from runners.models import Runner
from scheduler.models import Job
from tests.admin_forms import job_form

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
JOBS = {
    "jobs": [
        {"name": "train", "schedule": "@every 5m", "command": "true", "labels": ["gpu"]},
        {"name": "report", "schedule": "@every 5m", "command": "true", "labels": ["linux"]},
        {"name": "any", "schedule": "@every 5m", "command": "true"},
    ]
}
GPU_WARNING = (
    "warning: job train: no runner with labels gpu has been seen; its runs wait until one registers"
)


@pytest.fixture
def linux_runner(db):
    return Runner.objects.create(
        name="web-1", labels=["linux"], session="s", registered_at=NOW, last_seen_at=NOW,
        state=Runner.OFFLINE,
    )  # fmt: skip


def run_apply(tmp_path, *args):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(JOBS))
    out, err = StringIO(), StringIO()
    call_command("apply", str(path), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_apply_warns_of_labels_no_runner_carries_and_applies_anyway(tmp_path, linux_runner):
    out, err = run_apply(tmp_path)
    assert err.splitlines() == [GPU_WARNING]
    assert "applied 3 change(s)" in out
    assert Job.objects.filter(name="train").exists()


def test_with_json_the_plan_stays_parseable_and_the_warning_goes_to_stderr(tmp_path, linux_runner):
    out, err = run_apply(tmp_path, "--json", "--dry-run")
    assert [change["name"] for change in json.loads(out)] == ["train", "report", "any"]
    assert err.splitlines() == [GPU_WARNING]


def test_apply_says_nothing_once_a_runner_carried_the_labels(tmp_path, linux_runner):
    Runner.objects.create(
        name="gpu-1", labels=["gpu", "linux"], session="s", registered_at=NOW, last_seen_at=NOW
    )
    assert run_apply(tmp_path)[1] == ""


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@x.example", "pw"))
    return client


def messages_of(answer):
    return [(m.level_tag, m.message) for m in answer.context["messages"]]


def test_the_job_admin_warns_after_saving_a_job_no_runner_can_take(staff, linux_runner):
    answer = staff.post(reverse("admin:scheduler_job_add"), job_form(labels='["gpu"]'), follow=True)
    assert Job.objects.get(name="report").labels == ["gpu"]
    assert (
        "warning",
        "job report: no runner with labels gpu has been seen; its runs wait until one registers",
    ) in messages_of(answer)


def test_the_job_admin_stays_quiet_when_a_runner_carries_the_labels(staff, linux_runner):
    answer = staff.post(
        reverse("admin:scheduler_job_add"), job_form(labels='["linux"]'), follow=True
    )
    assert [level for level, _ in messages_of(answer)] == ["success"]


def test_apply_warns_when_only_older_agents_carry_a_feature_jobs_labels(tmp_path, linux_runner):
    Runner.objects.filter(pk=linux_runner.pk).update(version="0.2.0")
    path = tmp_path / "croniq.yaml"
    fed = {"name": "fed", "schedule": "@every 5m", "command": "cat", "labels": ["linux"]}
    path.write_text(yaml.safe_dump({"jobs": [{**fed, "stdin": "x\n", "run_as": "nobody"}]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "warning: job fed: the job needs run_as, stdin, which the agents of the runners "
        "with labels linux do not support: web-1 (0.2.0); upgrade croniq-runner and name "
        "the job's user in their --allow-run-as; its runs wait until one registers"
    ]
    Runner.objects.filter(pk=linux_runner.pk).update(features=["run_as", "stdin"])
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""


def test_the_job_admin_warns_when_only_older_agents_carry_a_run_as_jobs_labels(staff, linux_runner):
    form = job_form(labels='["linux"]', run_as="nobody")
    answer = staff.post(reverse("admin:scheduler_job_add"), form, follow=True)
    assert Job.objects.get(name="report").run_as == "nobody"
    assert (
        "warning",
        "job report: the job needs run_as, which the agents of the runners with labels linux "
        "do not allow (croniq-runner --allow-run-as) or predate: web-1 (version unknown); "
        "name the job's user in their --allow-run-as, or upgrade croniq-runner; its runs wait "
        "until one registers",
    ) in messages_of(answer)


def test_apply_says_a_current_agent_allowing_no_user_leaves_a_run_as_job_waiting(
    tmp_path, linux_runner
):
    # A current agent without --allow-run-as announces stdin, not run_as.
    Runner.objects.filter(pk=linux_runner.pk).update(version="0.3.0", features=["stdin"])
    path = tmp_path / "croniq.yaml"
    fed = {"name": "fed", "schedule": "@every 5m", "command": "cat", "labels": ["linux"]}
    path.write_text(yaml.safe_dump({"jobs": [{**fed, "stdin": "x\n", "run_as": "root"}]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "warning: job fed: the job needs run_as, which the agents of the runners with labels "
        "linux do not allow (croniq-runner --allow-run-as) or predate: web-1 (0.3.0); name "
        "the job's user in their --allow-run-as, or upgrade croniq-runner; its runs wait "
        "until one registers"
    ]
