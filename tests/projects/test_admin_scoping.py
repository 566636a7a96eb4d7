"""The admin by project (docs/design.md §11, projects.admin_scoping): each
list shows the rows of the projects where the user's role lets it see them,
another project's row is 403 on every page, a form's project offers only
where the role allows and refuses any other posted, and an action on a
selection holding a row out of reach changes nothing."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from checks.models import Check
from control.models import ApiKey
from notifications.models import Channel, Rule
from projects import roles
from projects.models import Project, Role
from scheduler.models import ConcurrencyGroup, Execution, Job
from scheduler.triage.dead_letters import DeadLetter
from tests import admin_forms
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory
from vault.models import Secret

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
A, B = "alpha", "beta"


def rows_of(project):
    """One row of each model a project holds, its names ending in the project's."""
    job = JobFactory(name=f"report-{project}", project=project)
    failed = ExecutionFactory(job=job, state=Execution.FAILED, finished_at=NOW)
    DeadLetter.objects.create(execution=failed, reason=DeadLetter.FAILED, landed_at=NOW)
    CalendarFactory(name=f"hours-{project}", project=project)
    ConcurrencyGroup.objects.create(name=f"db-{project}", max_concurrent=1, project=project)
    Check.objects.create(name=f"backup-{project}", period=3600, grace=60, project=project)
    channel = Channel.objects.create(
        name=f"mail-{project}", kind="email", to=["ops@example.com"], project=project
    )
    Rule.objects.create(name=f"failing-{project}", events=["job.failing"], project=project)
    Secret.objects.create(name=f"token-{project}", project=project, ciphertext="x")
    key = ApiKey.issue(f"ci-{project}", ["jobs:read"])[0]
    key.project = project
    key.save(update_fields=["project"])
    return {"job": job, "run": failed, "channel": channel, "key": key}


@pytest.fixture
def world():
    for name in (A, B):
        Project.objects.create(name=name)
    return {A: rows_of(A), B: rows_of(B)}


def member(client, name, **held):
    """A staff user holding a role in each project named (`alpha="editor"`), signed in."""
    user = User.objects.create_user(name, is_staff=True)
    for project, role in held.items():
        Role.objects.create(project=Project.objects.get(name=project), user=user, role=role)
    client.force_login(user)
    return user


# The changelists of what projects hold, with the field naming each row's project.
CHANGELISTS = {
    "scheduler_job": "project",
    "scheduler_execution": "job.project",
    "scheduler_deadletter": "execution.job.project",
    "scheduler_concurrencygroup": "project",
    "calendars_calendar": "project",
    "checks_check": "project",
    "checks_ping": "subject.project",
    "notifications_channel": "project",
    "notifications_rule": "project",
    "vault_secret": "project",
    "control_apikey": "project",
}


def project_of(row, path):
    for part in path.split("."):
        row = getattr(row, part)
    return row


def test_each_list_shows_the_rows_of_the_users_projects_alone(client, world):
    from checks import pings

    for project in (A, B):
        check = Check.objects.get(name=f"backup-{project}")
        pings.record(pings.Received(token=check.token, kind="success", at=NOW))
    member(client, "ann", alpha=roles.ADMIN)
    for changelist, path in CHANGELISTS.items():
        answer = client.get(reverse(f"admin:{changelist}_changelist"))
        assert answer.status_code == 200, changelist
        shown = {project_of(row, path) for row in answer.context["cl"].result_list}
        assert shown == {A}, changelist


def test_a_viewer_sees_neither_secrets_nor_keys_nor_what_is_global(client, world):
    member(client, "ann", alpha=roles.VIEWER)
    index = client.get(reverse("admin:index")).content.decode()
    assert reverse("admin:scheduler_job_changelist") in index
    assert reverse("admin:runners_runner_changelist") in index  # every project's
    for hidden in ("vault_secret", "control_apikey", "runners_runnertoken"):
        assert reverse(f"admin:{hidden}_changelist") not in index, hidden
        assert client.get(reverse(f"admin:{hidden}_changelist")).status_code == 403, hidden
    maintenance = reverse("admin:scheduler_maintenancewindow_changelist")
    assert client.get(maintenance).status_code == 403


def test_another_projects_row_is_refused_on_each_of_its_pages(client, world):
    member(client, "ann", alpha=roles.ADMIN)
    theirs = world[B]["job"]
    for view in ("change", "delete", "history"):
        url = reverse(f"admin:scheduler_job_{view}", args=[theirs.pk])
        assert client.get(url).status_code == 403, view
    mine = world[A]["job"]
    assert client.get(reverse("admin:scheduler_job_change", args=[mine.pk])).status_code == 200


def test_a_row_that_does_not_exist_still_sends_to_the_index(client, world):
    member(client, "ann", alpha=roles.ADMIN)
    answer = client.get(reverse("admin:scheduler_job_change", args=[999_999]))
    assert answer.status_code == 302


def project_choices(client, url):
    form = client.get(url).context["adminform"].form
    return [value for value, _ in form.fields["project"].choices]


def test_the_project_field_offers_where_the_role_lets_the_user_add(client, world):
    Project.objects.create(name="gamma")
    member(client, "ann", alpha=roles.EDITOR, beta=roles.VIEWER, gamma=roles.EDITOR)
    for model in ("scheduler_job", "calendars_calendar", "notifications_channel"):
        assert project_choices(client, reverse(f"admin:{model}_add")) == [A, "gamma"], model


def test_a_superuser_is_offered_every_project(client, world):
    client.force_login(User.objects.create_superuser("root"))
    choices = project_choices(client, reverse("admin:scheduler_job_add"))
    assert choices == [A, B, "default"]
    keys = project_choices(client, reverse("admin:control_apikey_add"))
    assert keys == ["", A, B, "default"]  # "": a key of every project


def test_a_project_admin_makes_keys_of_its_project_alone(client, world):
    member(client, "ann", alpha=roles.ADMIN)
    assert project_choices(client, reverse("admin:control_apikey_add")) == [A]
    answer = client.post(
        reverse("admin:control_apikey_add"), {"name": "every", "project": "", "scopes": ["admin"]}
    )
    assert answer.status_code == 200
    assert "project" in answer.context["adminform"].form.errors
    assert not ApiKey.objects.filter(name="every").exists()


def test_a_project_admin_keeps_secrets_in_its_project(client, world):
    member(client, "ann", alpha=roles.ADMIN, beta=roles.EDITOR)
    url = reverse("admin:vault_secret_add")
    refused = client.post(url, {"name": "db-password", "value": "s3cret", "project": B})
    assert "project" in refused.context["adminform"].form.errors
    assert (
        client.post(url, {"name": "db-password", "value": "s3cret", "project": A}).status_code
        == 302
    )
    assert list(Secret.objects.filter(name="db-password").values_list("project", flat=True)) == [A]


def test_a_crafted_post_naming_another_project_is_refused_on_its_field(client, world):
    member(client, "ann", alpha=roles.EDITOR, beta=roles.VIEWER)
    form = admin_forms.job_form(name="sneaky", project=B)

    answer = client.post(reverse("admin:scheduler_job_add"), form)

    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert list(errors) == ["project"]
    assert "not a project where you may put it" in errors["project"][0]
    assert not Job.objects.filter(name="sneaky").exists()


def test_an_add_posted_without_a_project_lands_in_the_users_project(client, world):
    # A script written before projects posts no project.
    member(client, "ann", alpha=roles.EDITOR)
    answer = client.post(reverse("admin:scheduler_job_add"), admin_forms.job_form(name="old"))
    assert answer.status_code == 302
    assert Job.objects.get(name="old").project == A


def move(client, job, project):
    form = admin_forms.job_form(name=job.name, schedule=job.schedule, project=project)
    return client.post(reverse("admin:scheduler_job_change", args=[job.pk]), form)


def test_moving_a_row_needs_the_right_in_both_projects(client, world):
    job = world[A]["job"]
    user = member(client, "ann", alpha=roles.EDITOR, beta=roles.OPERATOR)

    refused = move(client, job, B)
    assert refused.status_code == 200
    assert "project" in refused.context["adminform"].form.errors
    job.refresh_from_db()
    assert job.project == A

    Role.objects.filter(user=user, project__name=B).update(role=roles.EDITOR)
    assert move(client, job, B).status_code == 302
    job.refresh_from_db()
    assert job.project == B
    # And back is refused to who may only view it where it is now.
    Role.objects.filter(user=user, project__name=B).update(role=roles.VIEWER)
    assert move(client, job, A).status_code == 403


def test_an_action_on_a_selection_reaching_another_project_changes_nothing(client, world):
    member(client, "ann", alpha=roles.OPERATOR, beta=roles.VIEWER)
    mine, theirs = world[A]["job"], world[B]["job"]
    url = reverse("admin:scheduler_job_changelist")
    runs = Execution.objects.count()

    ticked = {"action": "run_now", "_selected_action": [mine.pk, theirs.pk]}
    assert client.post(url, ticked).status_code == 403
    every = {"action": "run_now", "_selected_action": [mine.pk], "select_across": "1"}
    assert client.post(url, every).status_code == 403  # the list holds B's job too

    assert Execution.objects.count() == runs
    alone = {"action": "run_now", "_selected_action": [mine.pk]}
    assert client.post(url, alone).status_code == 302
    assert Execution.objects.count() == runs + 1


def test_a_project_admin_may_not_revoke_a_global_key(client, world):
    member(client, "ann", alpha=roles.ADMIN)
    everyone = ApiKey.issue("global", ["jobs:read"])[0]
    url = reverse("admin:control_apikey_changelist")
    answer = client.post(url, {"action": "revoke", "_selected_action": [everyone.pk]})
    assert answer.status_code == 403
    everyone.refresh_from_db()
    assert everyone.revoked_at is None


def test_a_relations_choices_are_the_rows_the_user_sees(client, world):
    member(client, "ann", alpha=roles.EDITOR)
    form = client.get(reverse("admin:scheduler_job_add")).context["adminform"].form
    assert [c.name for c in form.fields["calendar"].queryset] == [f"hours-{A}"]
    assert [g.name for g in form.fields["concurrency_group"].queryset] == [f"db-{A}"]
    rule_form = client.get(reverse("admin:notifications_rule_add")).context["adminform"].form
    assert [c.name for c in rule_form.fields["channels"].queryset] == [f"mail-{A}"]


def test_a_channels_url_shows_unmasked_only_to_who_may_change_every_channel_listed(client, world):
    for project in (A, B):
        Channel.objects.filter(project=project).update(
            kind="webhook", url=f"https://hooks.example.com/secret-{project}"
        )
    member(client, "ann", alpha=roles.EDITOR)
    html = client.get(reverse("admin:notifications_channel_changelist")).content.decode()
    assert "secret-alpha" in html

    client.logout()
    member(client, "bob", alpha=roles.EDITOR, beta=roles.VIEWER)
    html = client.get(reverse("admin:notifications_channel_changelist")).content.decode()
    assert "secret-alpha" not in html and "secret-beta" not in html
