"""The dashboard by project (docs/design.md §11, dashboard.seen): a user
whose roles are per project sees those projects' jobs, runs, dead letters
and checks alone, on every page and in every aggregate; another project's
row is 404; `?project=` is a filter of its own, offered among the projects
the user sees."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.urls import reverse

from checks.models import Check
from projects import roles
from projects.models import Project, Role
from scheduler.models import Execution, Job
from scheduler.triage.dead_letters import DeadLetter

from .conftest import NOW
from .test_pages import OVERVIEW_QUERIES

A, B = "alpha", "beta"


@pytest.fixture(autouse=True)
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def world(make_job, make_execution):
    """Two projects, each with a job that failed an hour ago (a dead letter),
    a pending run, and a check; a job of `default` besides."""
    rows = {}
    for project, tag in ((A, "billing"), (B, "search")):
        Project.objects.create(name=project)
        job = make_job(f"report-{project}", project=project, tags=[tag], owner=f"team-{project}")
        failed = make_execution(
            job,
            NOW - timedelta(hours=1),
            state=Execution.FAILED,
            finished_at=NOW - timedelta(minutes=59),
        )
        DeadLetter.objects.create(execution=failed, reason=DeadLetter.FAILED, landed_at=NOW)
        pending = make_execution(job, NOW, state=Execution.PENDING)
        Check.objects.create(name=f"backup-{project}", period=3600, grace=60, project=project)
        rows[project] = {"job": job, "failed": failed, "pending": pending}
    make_job("housekeeping")
    return rows


def sign_in(client, name="ann", **held):
    user = get_user_model().objects.create_user(name, is_staff=True)
    for project, role in held.items():
        Role.objects.create(project=Project.objects.get(name=project), user=user, role=role)
    client.force_login(user)
    return user


def listed(client, **params):
    html = client.get(reverse("dashboard:overview"), params).content.decode()
    return re.findall(r'<tr data-job="([^"]+)"', html)


def offered_projects(client):
    html = client.get(reverse("dashboard:overview")).content.decode()
    select = re.search(r"<select name=\"project\".*?</select>", html, re.S).group()
    return re.findall(r'<option value="([^"]*)"', select)


def test_the_overview_lists_the_jobs_of_the_users_projects(client, world):
    sign_in(client, alpha=roles.VIEWER)
    assert listed(client) == [f"report-{A}"]
    assert listed(client, project=B) == []  # not a way round the roles


def test_the_project_filter_offers_the_projects_the_user_sees(client, world):
    Project.objects.create(name="gamma")
    sign_in(client, alpha=roles.VIEWER, gamma=roles.OPERATOR)
    assert offered_projects(client) == ["", A, "gamma"]


def test_project_is_a_filter_of_its_own(staff_client, world):
    assert offered_projects(staff_client) == ["", A, B, "default"]
    assert listed(staff_client) == ["housekeeping", f"report-{A}", f"report-{B}"]
    assert listed(staff_client, project=B) == [f"report-{B}"]
    assert listed(staff_client, project="default") == ["housekeeping"]
    assert listed(staff_client, project=B, tag="billing") == []
    html = staff_client.get(reverse("dashboard:overview"), {"project": B}).content.decode()
    assert f'<option value="{B}" selected>' in html


def test_another_projects_job_and_runs_are_404(client, world):
    sign_in(client, alpha=roles.ADMIN)
    theirs = world[B]
    pages = [
        reverse("dashboard:job", args=[theirs["job"].name]),
        reverse("dashboard:execution", args=[theirs["failed"].pk]),
        reverse("dashboard:execution-log", args=[theirs["failed"].pk]),
        reverse("dashboard:check", args=[f"backup-{B}"]),
    ]
    for url in pages:
        assert client.get(url).status_code == 404, url
    mine = world[A]
    assert client.get(reverse("dashboard:job", args=[mine["job"].name])).status_code == 200
    assert client.get(reverse("dashboard:check", args=[f"backup-{A}"])).status_code == 200


def test_the_lists_and_counts_hold_the_users_projects_alone(client, world):
    sign_in(client, alpha=roles.VIEWER)
    letters = client.get(reverse("dashboard:dead-letters")).content.decode()
    assert f"report-{A}" in letters and f"report-{B}" not in letters
    checks = client.get(reverse("dashboard:checks"))
    assert [check.name for check in checks.context["page"].items] == [f"backup-{A}"]
    assert sum(checks.context["counts"].values()) == 1
    overview = client.get(reverse("dashboard:overview"))
    states = dict((state, n) for state, _, n in overview.context["states"])
    assert states == {Execution.PENDING: 1, Execution.RUNNING: 0}  # A's; no global totals
    heat_rows = {row.job_name for row in overview.context["heatmap"].rows}
    assert heat_rows == {"", f"report-{A}"}  # all (of A's) jobs, then A's failing one
    suggested = overview.context["suggestions"]
    assert suggested["tags"] == ["billing"] and suggested["owners"] == [f"team-{A}"]


def test_the_palette_offers_the_users_projects_jobs_and_pages(client, world):
    sign_in(client, alpha=roles.VIEWER)
    entries = client.get("/palette").json()
    assert [job["name"] for job in entries["jobs"]] == [f"report-{A}"]
    pages = [page["name"] for page in entries["pages"]]
    # The runners are every project's; the alerts and the audit trail the global groups'.
    assert pages == ["Overview", "Checks", "Runners", "Capacity", "Dead letters", "Admin"]
    for url_name in ("alerts", "audit"):
        assert client.get(reverse(f"dashboard:{url_name}")).status_code == 403, url_name


def test_the_runners_page_names_the_runs_of_the_users_projects_alone(client, world, make_runner):
    runner = make_runner("web-1", capacity=4)
    for project in (A, B):
        Execution.objects.filter(pk=world[project]["pending"].pk).update(
            state=Execution.RUNNING, runner=runner, claimed_at=NOW
        )
    sign_in(client, alpha=roles.VIEWER)
    html = client.get(reverse("dashboard:runners")).content.decode()
    assert f"report-{A}" in html and f"report-{B}" not in html
    assert "1 run of other projects" in html
    assert "2 / 4 slots" in html


def test_no_link_leads_a_member_to_a_page_that_would_refuse_it(client, world):
    sign_in(client, alpha=roles.OPERATOR)
    for url in (
        reverse("dashboard:overview"),
        reverse("dashboard:job", args=[f"report-{A}"]),
        reverse("dashboard:check", args=[f"backup-{A}"]),
    ):
        html = client.get(url).content.decode()
        for refused in ("alerts", "audit"):
            assert f'href="{reverse(f"dashboard:{refused}")}' not in html, (url, refused)


def test_a_bulk_action_on_the_filter_acts_on_the_users_jobs_alone(client, world):
    from dashboard import bulk

    sign_in(client, alpha=roles.OPERATOR, beta=roles.VIEWER)
    url = reverse("dashboard:jobs-bulk")
    data = {"action": "pause", "scope": "filter", "reason": "maintenance"}
    answer = client.post(url, data)
    # B's job is seen, not acted on: left alone, and said so.
    assert f"You may not pause 1 of the jobs: report-{B}" in answer.content.decode()
    confirm = bulk.digest("pause", [world[A]["job"].pk])
    assert client.post(url, {**data, "confirm": confirm}).status_code == 302
    paused = Job.objects.filter(paused_at__isnull=False).values_list("name", flat=True)
    assert list(paused) == [f"report-{A}"]


def test_discarding_a_selection_reaching_another_project_changes_nothing(client, world):
    sign_in(client, alpha=roles.OPERATOR)
    ids = [letter.pk for letter in DeadLetter.objects.order_by("pk")]
    answer = client.post(reverse("dashboard:dead-letters-discard"), {"ids": ids})
    assert answer.status_code == 403
    assert not DeadLetter.objects.filter(discarded_at__isnull=False).exists()


def test_a_project_members_overview_reads_as_few_queries(
    client, world, django_assert_max_num_queries
):
    sign_in(client, alpha=roles.OPERATOR)
    with django_assert_max_num_queries(OVERVIEW_QUERIES):
        assert client.get(reverse("dashboard:overview")).status_code == 200


def test_the_capacity_page_names_the_groups_and_jobs_the_user_sees(client, world, make_job):
    from django.contrib.auth.models import Permission

    from scheduler.models import ConcurrencyGroup

    for project in (A, B):
        group = ConcurrencyGroup.objects.create(
            name=f"db-{project}", max_concurrent=1, project=project
        )
        Job.objects.filter(project=project).update(concurrency_group=group)
        # Left out of the forecast, named: its schedule cannot be read.
        make_job(f"broken-{project}", schedule="99 * * * *", project=project)
    # The runners are every project's: who sees them is given it globally.
    user = sign_in(client, alpha=roles.VIEWER)
    user.user_permissions.add(Permission.objects.get(codename="view_runner"))
    answer = client.get(reverse("dashboard:capacity"))
    assert [row["name"] for row in answer.context["groups"]] == [f"db-{A}"]
    assert f"report-{B}" not in answer.content.decode()
    assert list(answer.context["skipped"]) == [f"broken-{A}"]
