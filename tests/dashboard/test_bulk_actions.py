"""Bulk pause, resume and run from the overview (docs/design.md §17): on the
jobs ticked or every job the filter matches, after a confirmation naming
the action and how many jobs; the permission asked for each job, each job's
change audited as the single actions' are; a POST with the CSRF token only,
and nothing changed by a GET or by the first post."""

import re

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.urls import reverse

from audit.models import AuditEvent
from dashboard import bulk
from scheduler.models import Execution, Job

from .conftest import NOW

URL = "/bulk/jobs"


@pytest.fixture(autouse=True)
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


def user_in(group, name):
    user = get_user_model().objects.create_user(name, password=None, is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def operator(client, db):
    client.force_login(user_in("Croniq operators", "olga"))
    return client


@pytest.fixture
def viewer(client, db):
    client.force_login(user_in("Croniq viewers", "vic"))
    return client


@pytest.fixture
def jobs(make_job):
    return {
        "invoice": make_job("invoice", tags=["billing"]),
        "refund": make_job("refund", tags=["billing"]),
        "ledger": make_job("ledger", tags=["billing"], paused_at=NOW, pause_reason="audit"),
        "backup": make_job("backup", tags=["nightly"]),
    }


def ids(*names):
    return [Job.objects.get(name=name).pk for name in names]


def confirmation(answer):
    """The confirmation page's question and the confirm value it carries."""
    html = answer.content.decode()
    question = re.search(r"<h1 data-bulk-question>(.*?)</h1>", html).group(1)
    confirm = re.search(r'name="confirm" value="([0-9a-f]+)"', html).group(1)
    return question, confirm


def snapshot():
    return (
        list(Job.objects.order_by("pk").values()),
        Execution.objects.count(),
        AuditEvent.objects.count(),
    )


# -- ticked jobs --------------------------------------------------------------------


def test_the_first_post_asks_naming_the_action_and_how_many_and_changes_nothing(operator, jobs):
    before = snapshot()
    answer = operator.post(URL, {"action": "pause", "job": ["invoice", "backup"]})
    assert answer.status_code == 200
    question, confirm = confirmation(answer)
    assert question == "Pause 2 jobs?"
    assert confirm == bulk.digest("pause", ids("invoice", "backup"))
    html = answer.content.decode()
    assert re.findall(r'<li><a href="/jobs/([^/]+)/">', html) == ["backup", "invoice"]
    assert 'data-reason-for="job.pause"' in html
    assert snapshot() == before


def test_the_confirmed_post_pauses_each_job_audited_as_a_single_pause(operator, jobs):
    data = {"action": "pause", "job": ["invoice", "backup"], "reason": "disk full"}
    _, confirm = confirmation(operator.post(URL, data))
    answer = operator.post(URL, {**data, "confirm": confirm}, follow=True)
    assert answer.redirect_chain == [(reverse("dashboard:overview"), 302)]
    assert "Paused 2 of 2 job(s): disk full." in answer.content.decode()
    paused = Job.objects.filter(paused_at__isnull=False).order_by("name")
    assert [(j.name, j.pause_reason) for j in paused] == [
        ("backup", "disk full"),
        ("invoice", "disk full"),
        ("ledger", "audit"),
    ]
    events = AuditEvent.objects.filter(action="job.paused").order_by("target_repr")
    assert [(e.target_repr, e.actor_name, e.data) for e in events] == [
        ("backup", "olga", {"reason": "disk full", "bulk": 2}),
        ("invoice", "olga", {"reason": "disk full", "bulk": 2}),
    ]


def test_a_pause_needs_its_reason_at_the_confirmation(operator, jobs):
    data = {"action": "pause", "job": ["invoice"]}
    _, confirm = confirmation(operator.post(URL, data))
    before = snapshot()
    answer = operator.post(URL, {**data, "confirm": confirm, "reason": ""})
    assert answer.status_code == 200
    assert "Not paused: give a reason of 1 to 200 characters." in answer.content.decode()
    assert snapshot() == before


def test_resume_and_run_on_the_ticked_jobs(operator, jobs):
    data = {"action": "resume", "job": ["ledger", "invoice"]}
    question, confirm = confirmation(operator.post(URL, data))
    assert question == "Resume 2 jobs?"
    answer = operator.post(URL, {**data, "confirm": confirm}, follow=True)
    assert "Resumed 1 of 2 job(s); 1 were neither paused nor in error." in answer.content.decode()
    assert not Job.objects.filter(paused_at__isnull=False).exists()
    resumed = AuditEvent.objects.get(action="job.resumed")
    assert (resumed.target_repr, resumed.data["bulk"]) == ("ledger", 2)

    data = {"action": "run", "job": ["ledger", "backup"]}
    question, confirm = confirmation(operator.post(URL, data))
    assert question == "Run now 2 jobs?"
    answer = operator.post(URL, {**data, "confirm": confirm}, follow=True)
    assert "Started a run of 2 of 2 job(s)." in answer.content.decode()
    runs = Execution.objects.order_by("job__name")
    assert [(r.job.name, r.trigger) for r in runs] == [("backup", "manual"), ("ledger", "manual")]
    started = AuditEvent.objects.filter(action="job.run_now")
    assert sorted(e.data["bulk"] for e in started) == [2, 2]


def test_a_run_the_jobs_overlap_policy_refuses_is_named(operator, make_job, make_execution):
    busy = make_job("busy", singleton=True)
    make_execution(busy, NOW, state=Execution.RUNNING, singleton=True)
    make_job("idle")
    data = {"action": "run", "job": ["busy", "idle"]}
    _, confirm = confirmation(operator.post(URL, data))
    answer = operator.post(URL, {**data, "confirm": confirm}, follow=True)
    text = answer.content.decode()
    assert "Started a run of 1 of 2 job(s); 1 refused: busy is a singleton job and" in text
    assert Execution.objects.filter(job__name="idle").count() == 1


# -- every job the filter matches ---------------------------------------------------


def test_all_jobs_matching_the_filter_across_pages(operator, jobs, make_job):
    for i in range(60):
        make_job(f"charge-{i:02}", tags=["billing"])
    data = {"action": "pause", "scope": "filter", "tag": "billing", "state": "active"}
    answer = operator.post(URL, data)
    question, confirm = confirmation(answer)
    assert question == "Pause 62 jobs?"  # ledger is paused already: not active
    html = answer.content.decode()
    assert "Every job matching tag &#x27;billing&#x27;, state &#x27;active&#x27;" in html
    answer = operator.post(URL, {**data, "confirm": confirm, "reason": "freeze"})
    assert answer["Location"] == reverse("dashboard:overview") + "?tag=billing&state=active"
    assert Job.objects.filter(tags__isnull=False, paused_at__isnull=False).count() == 63
    assert Job.objects.get(name="backup").paused_at is None
    assert AuditEvent.objects.filter(action="job.paused").count() == 62


def test_jobs_that_changed_since_the_confirmation_are_asked_about_again(operator, jobs, make_job):
    data = {"action": "pause", "scope": "filter", "tag": "billing", "reason": "freeze"}
    _, confirm = confirmation(operator.post(URL, data))
    make_job("chargeback", tags=["billing"])  # matches the filter now
    before = snapshot()
    answer = operator.post(URL, {**data, "confirm": confirm})
    assert answer.status_code == 409
    assert "data-bulk-changed" in answer.content.decode()
    question, again = confirmation(answer)
    assert question == "Pause 4 jobs?" and again != confirm
    assert snapshot() == before
    operator.post(URL, {**data, "confirm": again})
    assert Job.objects.filter(paused_at__isnull=False).count() == 4


def test_a_confirmation_for_one_action_does_not_carry_out_another(operator, jobs):
    data = {"action": "pause", "job": ["invoice"], "reason": "x"}
    _, confirm = confirmation(operator.post(URL, data))
    answer = operator.post(URL, {**data, "action": "run", "confirm": confirm})
    assert answer.status_code == 409
    assert not Execution.objects.exists()


def test_nothing_ticked_or_matching_is_said_and_changes_nothing(operator, jobs):
    answer = operator.post(URL, {"action": "pause"}, follow=True)
    assert "Nothing to pause: no job is ticked." in answer.content.decode()
    answer = operator.post(URL, {"action": "run", "scope": "filter", "tag": "none"}, follow=True)
    assert "Nothing to run: no job matches the filter." in answer.content.decode()
    assert answer.redirect_chain[-1][0] == reverse("dashboard:overview") + "?tag=none"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"action": "delete", "job": ["invoice"]}, "action: one of pause, resume, run"),
        ({"action": "pause", "scope": "everything"}, "scope: selected or filter"),
        ({"action": "pause", "scope": "filter", "state": "asleep"}, "state: 'asleep' is not one"),
        ({"action": "pause", "scope": "filter", "tag": "a\x00"}, "tag: "),
        ({"action": "pause", "job": ["in\x00voice"]}, "job: not a job's name"),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field(operator, jobs, data, says):
    before = snapshot()
    answer = operator.post(URL, data)
    assert answer.status_code == 400
    assert answer.content.decode().startswith(says)
    assert snapshot() == before


def test_at_most_500_ticked_jobs(operator, jobs):
    answer = operator.post(URL, {"action": "pause", "job": [f"j{i}" for i in range(501)]})
    assert answer.status_code == 400
    assert "at most 500" in answer.content.decode()


# -- who may -------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["pause", "resume", "run"])
def test_a_viewer_is_refused_at_either_post_and_nothing_changes(viewer, jobs, action):
    before = snapshot()
    data = {"action": action, "job": ["invoice", "ledger"], "reason": "x"}
    assert viewer.post(URL, data).status_code == 403
    confirm = bulk.digest(action, ids("invoice", "ledger"))
    assert viewer.post(URL, {**data, "confirm": confirm}).status_code == 403
    assert viewer.post(URL, {**data, "scope": "filter"}).status_code == 403
    assert snapshot() == before


def test_the_overview_offers_the_bulk_actions_only_to_who_may(viewer, jobs):
    html = viewer.get(reverse("dashboard:overview")).content.decode()
    assert 'id="bulk"' not in html and 'name="job"' not in html
    user = user_in("Croniq operators", "otto")
    viewer.force_login(user)
    html = viewer.get(reverse("dashboard:overview"), {"tag": "billing"}).content.decode()
    assert re.findall(r'data-action="(job\.\w+)" data-bulk', html) == [
        "job.pause",
        "job.resume",
        "job.run",
    ]
    assert "all <strong data-matching>3</strong> jobs matching the filter" in html
    assert html.count('name="job"') == 3
    assert '<input type="hidden" name="tag" value="billing">' in html


class OwnerMayAct:
    """An object-permission backend, as per-project roles will be: a user may
    pause (and resume) the jobs whose owner is their name, and no other."""

    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user, permission, obj=None):
        owned = isinstance(obj, Job) and obj.owner == user.get_username()
        return owned and permission == "scheduler.pause_job"


@pytest.fixture
def owner_backend(settings):
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        f"{__name__}.OwnerMayAct",
    ]


def test_the_permission_is_asked_for_each_job(client, owner_backend, make_job):
    """A user holding the permission for one job but not the other acts on
    the one and is told the other is left alone; with none, 403."""
    user = get_user_model().objects.create_user("dana", password=None, is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    make_job("mine", owner="dana")
    make_job("theirs", owner="erin")
    data = {"action": "pause", "job": ["mine", "theirs"], "reason": "mine to stop"}
    answer = client.post(URL, data)
    question, confirm = confirmation(answer)
    assert question == "Pause 1 job?"
    assert "You may not pause 1 of the jobs: theirs; they are left alone." in (
        answer.content.decode()
    )
    assert confirm == bulk.digest("pause", ids("mine"))
    answer = client.post(URL, {**data, "confirm": confirm}, follow=True)
    assert "Paused 1 of 1 job(s): mine to stop." in answer.content.decode()
    assert list(Job.objects.filter(paused_at__isnull=False).values_list("name", flat=True)) == [
        "mine"
    ]
    # Running is granted on none: refused whole; so is a pause of theirs alone.
    assert client.post(URL, {"action": "run", "job": ["mine"]}).status_code == 403
    assert client.post(URL, {"action": "pause", "job": ["theirs"]}).status_code == 403
    assert not Execution.objects.exists()


# -- the request itself ---------------------------------------------------------------


def test_a_get_changes_nothing(operator, jobs):
    before = snapshot()
    answer = operator.get(URL, {"action": "pause", "job": ["invoice"], "reason": "x"})
    assert answer.status_code == 405
    assert snapshot() == before


def test_without_the_csrf_token_both_posts_are_refused(jobs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    data = {"action": "pause", "job": ["invoice"], "reason": "x"}
    before = snapshot()
    assert client.post(URL, data).status_code == 403
    confirm = bulk.digest("pause", ids("invoice"))
    assert client.post(URL, {**data, "confirm": confirm}).status_code == 403
    assert snapshot() == before


def test_with_the_token_from_the_overview_it_goes_through(jobs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    page = client.get(reverse("dashboard:overview"))
    token = re.search(
        r'id="bulk".*?name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode(), re.S
    ).group(1)
    data = {"action": "pause", "job": ["invoice"], "reason": "x", "csrfmiddlewaretoken": token}
    _, confirm = confirmation(client.post(URL, data))
    assert client.post(URL, {**data, "confirm": confirm}).status_code == 302
    assert Job.objects.get(name="invoice").paused_at is not None


def test_anonymous_users_are_sent_to_log_in(client, jobs):
    answer = client.post(URL, {"action": "pause", "job": ["invoice"]})
    assert answer.status_code == 302
    assert answer["Location"].startswith("/accounts/login/")
