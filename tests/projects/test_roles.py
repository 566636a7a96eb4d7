"""Roles per project (docs/design.md §11): each role holds the one before
it and more; a role answers only for rows of its project, given to a user
or to a group; a global group answers for every project; a role never
grants a permission without a row."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from projects import roles, scoping
from projects.models import Project, Role
from scheduler.models import Job
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

EVERY_ACTION = [
    "scheduler.view_job",
    "scheduler.run_job",
    "scheduler.pause_job",
    "scheduler.cancel_execution",
    "scheduler.change_job",
    "scheduler.add_job",
    "vault.add_secret",
    "control.revoke_apikey",
    "projects.add_role",
]
# The least role each needs.
LEAST = {
    "scheduler.view_job": "viewer",
    "scheduler.run_job": "operator",
    "scheduler.pause_job": "operator",
    "scheduler.cancel_execution": "operator",
    "scheduler.change_job": "editor",
    "scheduler.add_job": "editor",
    "vault.add_secret": "admin",
    "control.revoke_apikey": "admin",
    "projects.add_role": "admin",
}


@pytest.fixture
def two_projects():
    team_a, team_b = Project.objects.create(name="team-a"), Project.objects.create(name="team-b")
    return (
        team_a,
        team_b,
        JobFactory(name="a-job", project="team-a"),
        JobFactory(name="b-job", project="team-b"),
    )


def user(name="ann"):
    return User.objects.create_user(name, is_staff=True)


@pytest.mark.parametrize("role", roles.ORDER)
def test_each_role_answers_for_its_project_alone(two_projects, role):
    team_a, _, a_job, b_job = two_projects
    ann = user()
    Role.objects.create(project=team_a, user=ann, role=role)
    for permission in EVERY_ACTION:
        expected = roles.ORDER.index(role) >= roles.ORDER.index(LEAST[permission])
        assert ann.has_perm(permission, a_job) is expected, (role, permission)
        assert ann.has_perm(permission, b_job) is False, (role, permission)
        assert ann.has_perm(permission) is False, (role, permission)  # never global


def test_a_groups_role_reaches_its_members_and_the_highest_role_wins(two_projects):
    team_a, _, a_job, _ = two_projects
    ann = user()
    team = Group.objects.create(name="team-a-people")
    ann.groups.add(team)
    Role.objects.create(project=team_a, group=team, role=roles.EDITOR)
    Role.objects.create(project=team_a, user=ann, role=roles.VIEWER)
    assert scoping.role_in(ann, "team-a") == roles.EDITOR
    assert ann.has_perm("scheduler.change_job", a_job)


def test_runs_and_dead_letters_belong_to_their_jobs_project(two_projects):
    team_a, _, a_job, b_job = two_projects
    ann = user()
    Role.objects.create(project=team_a, user=ann, role=roles.OPERATOR)
    mine, theirs = ExecutionFactory(job=a_job), ExecutionFactory(job=b_job)
    assert ann.has_perm("scheduler.retry_execution", mine)
    assert not ann.has_perm("scheduler.retry_execution", theirs)
    letter = DeadLetter(execution=theirs, reason=DeadLetter.FAILED, landed_at=theirs.created_at)
    assert scoping.project_of(letter) == "team-b"
    assert not ann.has_perm("scheduler.replay_deadletter", letter)


def test_a_global_group_answers_for_every_project_with_or_without_a_row(two_projects):
    _, _, a_job, b_job = two_projects
    ann = user()
    ann.groups.add(Group.objects.get_or_create(name="Croniq operators")[0])
    Group.objects.get(name="Croniq operators").permissions.add(
        *Permission.objects.filter(codename="pause_job")
    )
    assert ann.has_perm("scheduler.pause_job")
    assert ann.has_perm("scheduler.pause_job", a_job) and ann.has_perm("scheduler.pause_job", b_job)


def test_an_inactive_user_holds_no_role(two_projects):
    team_a, _, a_job, _ = two_projects
    ann = user()
    Role.objects.create(project=team_a, user=ann, role=roles.ADMIN)
    ann.is_active = False
    ann.save()
    ann = User.objects.get(pk=ann.pk)
    assert not ann.has_perm("scheduler.view_job", a_job)


def test_lists_narrow_to_the_projects_a_role_may_see(two_projects):
    team_a, _, a_job, _ = two_projects
    ann = user()
    Role.objects.create(project=team_a, user=ann, role=roles.VIEWER)
    seen = scoping.visible(ann, "scheduler.view_job", Job.objects.all())
    assert list(seen) == [a_job]
    assert scoping.may(ann, "scheduler.view_job")  # some project: the admin shows jobs
    assert not scoping.may(ann, "scheduler.change_job")


def test_a_role_is_given_to_a_user_or_a_group_not_both(two_projects):
    from django.core.exceptions import ValidationError

    team_a = two_projects[0]
    with pytest.raises(ValidationError):
        Role(project=team_a, role=roles.VIEWER).full_clean()


def test_any_role_reads_the_runners_every_project_shares(two_projects):
    team_a = two_projects[0]
    ann, bob = user(), user("bob")
    Role.objects.create(project=team_a, user=ann, role=roles.VIEWER)
    assert ann.has_perm("runners.view_runner")
    assert not ann.has_perm("runners.drain_runner")
    assert not bob.has_perm("runners.view_runner")  # no role anywhere
