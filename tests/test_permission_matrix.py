"""Every operator action, through the admin and the dashboard, for every kind
of user: allowed, or refused with 403 and nothing changed in the database.

The kinds are the global ones (the Croniq groups, staff outside them, a
superuser), which answer for every project, and the four roles of project
A (docs/design.md §11), which answer for A's rows alone: on B's rows each
is refused (403, 404, or the form's project field), nothing changed."""

import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from importlib import import_module
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.contrib.messages import get_messages
from django.db import connection, transaction
from django.urls import reverse

from audit.models import AuditEvent
from calendars.models import Calendar, CalendarPeriod
from control.models import ApiKey
from dashboard import bulk
from notifications.models import Channel, Mute, Rule
from projects.models import Project, Role
from runners.models import Runner, RunnerToken
from scheduler.models import Execution, Job
from scheduler.triage.dead_letters import DeadLetter
from tests import admin_forms
from tests.factories import (
    CalendarFactory,
    ExecutionFactory,
    JobFactory,
    RunnerFactory,
    RunnerTokenFactory,
)

croniq_groups = import_module("dashboard.migrations.0001_croniq_groups")
notification_groups = import_module("dashboard.migrations.0002_notification_groups")
key_groups = import_module("dashboard.migrations.0003_api_key_groups")

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

ROLES = ["viewer", "operator", "admin", "staff", "superuser"]
GROUP_OF = {
    "viewer": croniq_groups.VIEWERS,
    "operator": croniq_groups.OPERATORS,
    "admin": croniq_groups.ADMINS,
}
DAY_TO_DAY = {
    "job.run",
    "job.pause",
    "job.resume",
    "execution.cancel",
    "execution.retry",
    "deadletter.replay",
    "deadletter.discard",
    "runner.drain",
    "runner.resume",
    "mute.add",
    "mute.end",
}


def allowed(role, action):
    """The matrix this file checks the code against."""
    if role in ("admin", "superuser"):
        return True
    return role == "operator" and action in DAY_TO_DAY


# Project A and B; the project roles are held in A.
A, B = "alpha", "beta"
PROJECT_ROLES = ["viewer", "operator", "editor", "admin"]
# What each project role adds to the one before it (the contract of §11);
# runners, runner tokens and mutes are global: no role reaches them.
ROLE_ACTIONS = {
    "viewer": set(),
    "operator": {
        "job.run",
        "job.pause",
        "job.resume",
        "execution.cancel",
        "execution.retry",
        "deadletter.replay",
        "deadletter.discard",
    },
    "editor": {
        "job.add",
        "job.change",
        "job.delete",
        "job.webhook",
        "calendar.add",
        "calendar.change",
        "channel.add",
        "channel.change",
        "channel.delete",
        "rule.add",
        "rule.change",
        "rule.delete",
        "channel.test",
    },
    "admin": {"apikey.add", "apikey.revoke"},
}
# Adds name their project in the form: another project's is refused there.
ADDS = {"job.add", "calendar.add", "channel.add", "rule.add", "apikey.add"}


def role_allows(role, action):
    """Whether `role`, held in the project of the row acted on, allows `action`."""
    held = PROJECT_ROLES[: PROJECT_ROLES.index(role) + 1]
    return any(action in ROLE_ACTIONS[r] for r in held)


@dataclass
class World:
    job: Job
    paused_job: Job
    pending: Execution
    failed: Execution
    runner: Runner
    draining: Runner
    token: RunnerToken
    calendar: Calendar
    channel: Channel
    rule: Rule
    mute: Mute
    apikey: ApiKey
    dead_letter: DeadLetter


def build_world(project, suffix=""):
    """One of each row the actions act on, the project's rows in `project`;
    `suffix` ends every name, for a second world beside the first."""
    Project.objects.get_or_create(name=project)
    job = JobFactory(
        name=f"nightly{suffix}", schedule="30 2 * * *", next_run_at=NOW, project=project
    )
    failed_at = datetime(2026, 11, 29, 2, 30, tzinfo=UTC)
    channel = Channel.objects.create(
        name=f"ops-mail{suffix}", kind="email", to=["ops@example.com"], project=project
    )
    rule = Rule.objects.create(name=f"failures{suffix}", events=["job.failing"], project=project)
    rule.channels.add(channel)
    apikey = ApiKey.issue(f"ci{suffix}", ["jobs:read"])[0]
    apikey.project = project
    apikey.save(update_fields=["project"])
    paused = {"paused_at": NOW, "webhook": True, "project": project}
    return World(
        job=job,
        paused_job=JobFactory(name=f"weekly{suffix}", schedule="0 3 * * 1", **paused),
        pending=ExecutionFactory(job=job, scheduled_for=NOW, state=Execution.PENDING),
        failed=ExecutionFactory(job=job, scheduled_for=failed_at, state=Execution.FAILED),
        runner=RunnerFactory(name=f"web-1{suffix}", registered_at=NOW, last_seen_at=NOW),
        draining=RunnerFactory(
            name=f"web-2{suffix}", registered_at=NOW, last_seen_at=NOW, state=Runner.DRAINING
        ),
        token=RunnerTokenFactory(name=f"spare{suffix}"),
        calendar=CalendarFactory(name=f"ops{suffix}", timezone="UTC", project=project),
        channel=channel,
        rule=rule,
        mute=Mute.objects.create(job=job, until=MUTED_UNTIL, note="deploy", created_at=NOW),
        apikey=apikey,
        dead_letter=DeadLetter.objects.create(
            execution=ExecutionFactory(
                job=job, scheduled_for=failed_at - timedelta(days=1), state=Execution.FAILED
            ),
            reason="failed",
            landed_at=failed_at,
        ),
    )


@pytest.fixture
def world():
    """The rows in B: the global kinds answer there as in any project."""
    return build_world(B)


@pytest.fixture
def user_for(django_user_model):
    # The migration created the groups; a transactional test's flush may have
    # dropped them since. Running it again is harmless: it is idempotent.
    editor = SimpleNamespace(connection=connection)
    croniq_groups.create_groups(django_apps, editor)
    notification_groups.grant(django_apps, editor)
    key_groups.grant(django_apps, editor)

    def make(role):
        if role == "superuser":
            return django_user_model.objects.create_superuser("root", password=None)
        user = django_user_model.objects.create_user(role, password=None, is_staff=True)
        if role in GROUP_OF:
            user.groups.add(Group.objects.get(name=GROUP_OF[role]))
        return user

    return make


@pytest.fixture
def member_of_a(django_user_model):
    """A staff user holding `role` in project A alone."""

    def make(role):
        project, _ = Project.objects.get_or_create(name=A)
        user = django_user_model.objects.create_user(f"{role}-of-a", is_staff=True)
        Role.objects.create(project=project, user=user, role=role)
        return user

    return make


def admin_action(changelist, name, target):
    def build(world):
        # "post" confirms delete_selected; the other actions ignore it.
        data = {"action": name, "_selected_action": [target(world).pk], "post": "yes"}
        return reverse(f"admin:{changelist}_changelist"), data

    return build


def dashboard_post(url_name, target, data=None):
    return lambda world: (reverse(f"dashboard:{url_name}", args=[target(world)]), data or {})


def bulk_post(action, job):
    data = {"action": action, "job": [job.name], "reason": "maintenance"}
    return reverse("dashboard:jobs-bulk"), {**data, "confirm": bulk.digest(action, [job.pk])}


def job_form(world):
    return admin_forms.job_form(
        name=world.job.name,
        description="edited",
        command="rm -rf /srv/reports",
        schedule=world.job.schedule,
        timezone="UTC",
    )


def project_of(world):
    return world.job.project


MUTED_UNTIL = datetime(2099, 1, 1, tzinfo=UTC)  # the forms refuse a mute already over


def channel_form(world, name):
    return {
        "name": name,
        "project": project_of(world),
        "kind": "email",
        "enabled": "on",
        "to": "oncall@example.com",
    }


def rule_form(world, name):
    return {
        "name": name,
        "project": project_of(world),
        "enabled": "on",
        "events": ["job.failing"],
        "failures_in_a_row": "2",
        "channels": [world.channel.pk],
        "throttle": "30m",
    }


def mute_form(world):
    return {"job": world.job.pk, "until_0": "2099-01-01", "until_1": "00:00:00", "note": "night"}


# (way, action) -> how to ask for it: world -> (url, POST data).
REQUESTS = {
    ("admin", "job.run"): admin_action("scheduler_job", "run_now", lambda w: w.job),
    ("admin", "job.pause"): admin_action("scheduler_job", "pause", lambda w: w.job),
    ("admin", "job.resume"): admin_action("scheduler_job", "resume", lambda w: w.paused_job),
    ("admin", "execution.cancel"): admin_action(
        "scheduler_execution", "cancel", lambda w: w.pending
    ),
    ("admin", "execution.retry"): admin_action("scheduler_execution", "retry", lambda w: w.failed),
    # Forced: the dead letter's instant is past, and stale however the clock moves.
    ("admin", "deadletter.replay"): admin_action(
        "scheduler_deadletter", "replay_forced", lambda w: w.dead_letter
    ),
    ("admin", "deadletter.discard"): admin_action(
        "scheduler_deadletter", "discard", lambda w: w.dead_letter
    ),
    ("admin", "runner.drain"): admin_action("runners_runner", "drain", lambda w: w.runner),
    ("admin", "runner.resume"): admin_action("runners_runner", "resume", lambda w: w.draining),
    ("admin", "runner.forget"): admin_action("runners_runner", "forget", lambda w: w.runner),
    ("admin", "token.revoke"): admin_action("runners_runnertoken", "revoke", lambda w: w.token),
    ("admin", "apikey.revoke"): admin_action("control_apikey", "revoke", lambda w: w.apikey),
    ("admin", "apikey.add"): lambda w: (
        reverse("admin:control_apikey_add"),
        {"name": "new-key", "project": project_of(w), "scopes": ["jobs:read", "jobs:trigger"]},
    ),
    ("admin", "job.delete"): admin_action("scheduler_job", "delete_selected", lambda w: w.job),
    # A new webhook URL: who may change the job.
    ("admin", "job.webhook"): admin_action(
        "scheduler_job", "regenerate_webhooks", lambda w: w.paused_job
    ),
    ("admin", "job.add"): lambda w: (
        reverse("admin:scheduler_job_add"),
        {**job_form(w), "name": "new-job", "project": project_of(w)},
    ),
    ("admin", "job.change"): lambda w: (
        reverse("admin:scheduler_job_change", args=[w.job.pk]),
        job_form(w),
    ),
    ("admin", "calendar.add"): lambda w: (
        reverse("admin:calendars_calendar_add"),
        admin_forms.calendar_form(name="new-calendar", project=project_of(w)),
    ),
    ("admin", "calendar.change"): lambda w: (
        reverse("admin:calendars_calendar_change", args=[w.calendar.pk]),
        admin_forms.calendar_form(name=w.calendar.name),
    ),
    ("admin", "token.add"): lambda w: (reverse("admin:runners_runnertoken_add"), {"name": "new"}),
    ("admin", "token.delete"): lambda w: (
        reverse("admin:runners_runnertoken_delete", args=[w.token.pk]),
        {"post": "yes"},
    ),
    ("admin", "channel.add"): lambda w: (
        reverse("admin:notifications_channel_add"),
        channel_form(w, "new-mail"),
    ),
    ("admin", "channel.change"): lambda w: (
        reverse("admin:notifications_channel_change", args=[w.channel.pk]),
        channel_form(w, w.channel.name),
    ),
    ("admin", "channel.delete"): admin_action(
        "notifications_channel", "delete_selected", lambda w: w.channel
    ),
    ("admin", "rule.add"): lambda w: (
        reverse("admin:notifications_rule_add"),
        rule_form(w, "new-rule"),
    ),
    ("admin", "rule.change"): lambda w: (
        reverse("admin:notifications_rule_change", args=[w.rule.pk]),
        rule_form(w, w.rule.name),
    ),
    ("admin", "mute.add"): lambda w: (reverse("admin:notifications_mute_add"), mute_form(w)),
    ("admin", "mute.end"): admin_action("notifications_mute", "end_now", lambda w: w.mute),
    ("admin", "mute.delete"): admin_action(
        "notifications_mute", "delete_selected", lambda w: w.mute
    ),
    ("dashboard", "job.run"): dashboard_post("job-run", lambda w: w.job.name),
    ("dashboard", "job.pause"): dashboard_post(
        "job-pause", lambda w: w.job.name, {"reason": "maintenance"}
    ),
    ("dashboard", "job.resume"): dashboard_post("job-resume", lambda w: w.paused_job.name),
    ("dashboard", "execution.cancel"): dashboard_post("execution-cancel", lambda w: w.pending.pk),
    ("dashboard", "execution.retry"): dashboard_post("execution-retry", lambda w: w.failed.pk),
    ("dashboard", "deadletter.replay"): dashboard_post(
        "dead-letter-replay", lambda w: w.dead_letter.pk, {"force": "on"}
    ),
    ("dashboard", "deadletter.discard"): dashboard_post(
        "dead-letter-discard", lambda w: w.dead_letter.pk
    ),
    ("dashboard", "runner.drain"): dashboard_post("runner-drain", lambda w: w.runner.pk),
    ("dashboard", "runner.resume"): dashboard_post("runner-resume", lambda w: w.draining.pk),
    ("dashboard", "runner.forget"): dashboard_post("runner-forget", lambda w: w.runner.pk),
    # The overview's bulk actions, confirmed (dashboard.bulk).
    ("bulk", "job.run"): lambda w: bulk_post("run", w.job),
    ("bulk", "job.pause"): lambda w: bulk_post("pause", w.job),
    ("bulk", "job.resume"): lambda w: bulk_post("resume", w.paused_job),
}

# Adds answered with a page that shows the new secret once, not a redirect.
ANSWERED = {"apikey.add": 200, "token.add": 200}

# Actions the admin hands to a module of their own: the module they need.
MADE_ELSEWHERE = {"mute.add": "notifications.mutes", "mute.end": "notifications.mutes"}

TABLES = [
    Job,
    Execution,
    Runner,
    RunnerToken,
    Calendar,
    CalendarPeriod,
    Channel,
    Rule,
    Rule.channels.through,
    Mute,
    ApiKey,
    DeadLetter,
    AuditEvent,
]


def snapshot():
    return {model.__name__: list(model.objects.order_by("pk").values()) for model in TABLES}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("way", "action"), list(REQUESTS))
def test_each_action_is_allowed_or_refused_with_nothing_changed(
    client, world, user_for, role, way, action
):
    if allowed(role, action) and action in MADE_ELSEWHERE:
        pytest.importorskip(MADE_ELSEWHERE[action])
    client.force_login(user_for(role))
    url, data = REQUESTS[way, action](world)
    before = snapshot()
    answer = client.post(url, data)
    after = snapshot()
    if allowed(role, action):
        assert answer.status_code == ANSWERED.get(action, 302), answer.content.decode()[:3000]
        assert after != before, "an allowed action changed nothing"
        assert len(after["AuditEvent"]) > len(before["AuditEvent"]), "not audited"
    else:
        assert answer.status_code == 403
        assert after == before


@contextmanager
def undone():
    """What the block writes is rolled back after it (a savepoint): one
    world serves each role in turn."""
    with transaction.atomic():
        try:
            yield
        finally:
            transaction.set_rollback(True)


@pytest.mark.parametrize(("way", "action"), list(REQUESTS))
def test_each_project_role_acts_on_its_projects_rows_alone(client, member_of_a, way, action):
    mine, theirs = build_world(A), build_world(B, suffix="-b")
    members = {role: member_of_a(role) for role in PROJECT_ROLES}
    before = snapshot()  # and again after each role: its writes are undone
    for role, member in members.items():
        client.force_login(member)

        # B's rows: refused whatever the role, nothing changed.
        url, data = REQUESTS[way, action](theirs)
        answer = client.post(url, data)
        assert snapshot() == before, role
        if action in ADDS and role_allows(role, action):
            # The form again, its project field refusing B (and B's channels
            # not among a rule's choices).
            assert answer.status_code == 200, role
            assert "project" in answer.context["adminform"].form.errors, role
        else:
            assert answer.status_code in (403, 404), (role, answer.status_code)

        # A's rows: as far as the role goes.
        url, data = REQUESTS[way, action](mine)
        with undone():
            answer = client.post(url, data)
            after = snapshot()
        if role_allows(role, action):
            expected = ANSWERED.get(action, 302)
            assert answer.status_code == expected, (role, answer.content.decode()[:3000])
            assert after != before, f"{role}: an allowed action changed nothing"
            assert len(after["AuditEvent"]) > len(before["AuditEvent"]), f"{role}: not audited"
        else:
            assert answer.status_code == 403, role
            assert after == before, role


def test_the_matrix_covers_every_action_in_both_places():
    from core.permissions import ACTIONS

    assert {action for way, action in REQUESTS if way == "admin"} >= set(ACTIONS)
    dashboard = {action for way, action in REQUESTS if way == "dashboard"}
    # Tokens and API keys are not on the dashboard.
    assert dashboard == set(ACTIONS) - {"token.revoke", "apikey.revoke"}


class ButtonFinder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.actions = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "button" and attrs.get("data-action"):
            self.actions.add(attrs["data-action"])


def buttons(client, url):
    answer = client.get(url)
    assert answer.status_code == 200
    finder = ButtonFinder()
    finder.feed(answer.content.decode())
    return finder.actions


@pytest.mark.parametrize("role", ["viewer", "operator", "admin", "superuser"])
def test_the_dashboard_shows_only_the_buttons_the_user_may_use(client, world, user_for, role):
    client.force_login(user_for(role))
    pages = {
        reverse("dashboard:job", args=[world.job.name]): {"job.run", "job.pause"},
        reverse("dashboard:job", args=[world.paused_job.name]): {"job.run", "job.resume"},
        reverse("dashboard:execution", args=[world.pending.pk]): {"execution.cancel"},
        reverse("dashboard:execution", args=[world.failed.pk]): {"execution.retry"},
        reverse("dashboard:runners"): {"runner.drain", "runner.resume", "runner.forget"},
        reverse("dashboard:dead-letters"): {"deadletter.replay", "deadletter.discard"},
        reverse("dashboard:overview"): {"job.run", "job.pause", "job.resume"},
    }
    for url, offered in pages.items():
        expected = {action for action in offered if allowed(role, action)}
        assert buttons(client, url) == expected, url
    # The rows the runners page's script puts in place offer the same.
    finder = ButtonFinder()
    finder.feed(client.get(reverse("dashboard:runners-rows")).json()["html"])
    assert finder.actions == buttons(client, reverse("dashboard:runners"))


@pytest.mark.parametrize("role", PROJECT_ROLES)
def test_the_dashboard_shows_a_project_role_the_buttons_its_role_allows(client, member_of_a, role):
    world = build_world(A)
    client.force_login(member_of_a(role))
    pages = {
        reverse("dashboard:job", args=[world.job.name]): {"job.run", "job.pause"},
        reverse("dashboard:job", args=[world.paused_job.name]): {"job.run", "job.resume"},
        reverse("dashboard:execution", args=[world.pending.pk]): {"execution.cancel"},
        reverse("dashboard:execution", args=[world.failed.pk]): {"execution.retry"},
        reverse("dashboard:dead-letters"): {"deadletter.replay", "deadletter.discard"},
        reverse("dashboard:overview"): {"job.run", "job.pause", "job.resume"},
        # Every project's runners, seen by any role, acted on by the global groups.
        reverse("dashboard:runners"): {"runner.drain", "runner.resume", "runner.forget"},
    }
    for url, offered in pages.items():
        expected = {action for action in offered if role_allows(role, action)}
        assert buttons(client, url) == expected, url


ADMIN_ACTIONS = {
    "scheduler_job": {
        "run_now": "job.run",
        "pause": "job.pause",
        "resume": "job.resume",
        "regenerate_webhooks": "job.webhook",
        "delete_selected": "job.delete",
    },
    "scheduler_execution": {
        "cancel": "execution.cancel",
        "retry": "execution.retry",
        "delete_selected": "execution.delete",
    },
    "scheduler_deadletter": {
        "replay": "deadletter.replay",
        "replay_forced": "deadletter.replay",
        "discard": "deadletter.discard",
        "delete_selected": "deadletter.delete",
    },
    "runners_runner": {
        "drain": "runner.drain",
        "resume": "runner.resume",
        "forget": "runner.forget",
    },
    "runners_runnertoken": {"revoke": "token.revoke", "delete_selected": "token.delete"},
    "notifications_channel": {"send_test": "channel.test", "delete_selected": "channel.delete"},
    "notifications_rule": {"delete_selected": "rule.delete"},
    "notifications_mute": {"end_now": "mute.end", "delete_selected": "mute.delete"},
    "control_apikey": {"revoke": "apikey.revoke"},
}
# Changelists only the admins may open at all (API keys act for no person).
ADMINS_ONLY = {"control_apikey"}


@pytest.mark.parametrize("role", ["viewer", "operator", "admin", "superuser"])
def test_admin_changelists_offer_only_the_actions_the_user_may_use(client, world, user_for, role):
    client.force_login(user_for(role))
    for changelist, actions in ADMIN_ACTIONS.items():
        answer = client.get(reverse(f"admin:{changelist}_changelist"))
        if changelist in ADMINS_ONLY and role not in ("admin", "superuser"):
            assert answer.status_code == 403, changelist
            continue
        assert answer.status_code == 200, changelist
        form = answer.context["action_form"]
        offered = {name for name, _ in form.fields["action"].choices if name} if form else set()
        expected = {name for name, action in actions.items() if allowed(role, action)}
        assert offered == expected, changelist


# Changelists of what no project holds: no role opens them (the runners,
# which every project shares, any role reads, and acts on none).
GLOBAL_ONLY = {"runners_runnertoken", "notifications_mute"}


@pytest.mark.parametrize("role", PROJECT_ROLES)
def test_admin_changelists_offer_a_project_role_the_actions_its_role_allows(
    client, member_of_a, role
):
    build_world(A)
    client.force_login(member_of_a(role))
    for changelist, actions in ADMIN_ACTIONS.items():
        answer = client.get(reverse(f"admin:{changelist}_changelist"))
        if changelist in GLOBAL_ONLY or (changelist in ADMINS_ONLY and role != "admin"):
            assert answer.status_code == 403, changelist
            continue
        assert answer.status_code == 200, changelist
        form = answer.context["action_form"]
        offered = {name for name, _ in form.fields["action"].choices if name} if form else set()
        expected = {name for name, action in actions.items() if role_allows(role, action)}
        assert offered == expected, changelist


def test_staff_outside_the_groups_can_open_neither_the_admin_nor_the_dashboard(
    client, world, user_for
):
    client.force_login(user_for("staff"))
    for changelist in ADMIN_ACTIONS:
        assert client.get(reverse(f"admin:{changelist}_changelist")).status_code == 403
    pages = [
        reverse("dashboard:overview"),
        reverse("dashboard:job", args=[world.job.name]),
        reverse("dashboard:execution", args=[world.failed.pk]),
        reverse("dashboard:execution-log", args=[world.failed.pk]),
        reverse("dashboard:runners"),
        reverse("dashboard:runners-rows"),
        reverse("dashboard:audit"),
        reverse("dashboard:dead-letters"),
    ]
    for url in pages:
        assert client.get(url).status_code == 403, url


def test_a_get_on_an_action_url_changes_nothing(client, world, user_for):
    client.force_login(user_for("superuser"))
    before = snapshot()
    assert client.get(reverse("dashboard:job-run", args=[world.job.name])).status_code == 405
    assert snapshot() == before


def test_anonymous_action_posts_go_to_the_login_and_change_nothing(client, world):
    before = snapshot()
    answer = client.post(reverse("dashboard:runner-forget", args=[world.runner.pk]))
    assert answer.status_code == 302
    assert answer["Location"].startswith("/accounts/login/")
    assert snapshot() == before


# -- channels cannot read the server's secrets, whoever writes them ------------

HOSTILE_CHANNELS = {
    "environ-file": {"url": "file:/proc/self/environ"},
    "server-secret-header": {
        "url": "https://hooks.example.com/in",
        "headers": "X-Key: ${SECRET_KEY}",
    },
    "database-url-signing": {"url": "https://hooks.example.com/in", "secret": "${DATABASE_URL}"},
}


@pytest.mark.parametrize("role", ["admin", "superuser"])
@pytest.mark.parametrize("fields", HOSTILE_CHANNELS.values(), ids=list(HOSTILE_CHANNELS))
def test_no_one_saves_a_channel_reading_the_server_s_secrets(client, world, user_for, role, fields):
    client.force_login(user_for(role))
    form = {"name": "exfil", "kind": "webhook", "enabled": "on", "format": "slack", "timeout": "5"}
    before = snapshot()

    answer = client.post(reverse("admin:notifications_channel_add"), {**form, **fields})

    assert answer.status_code == 200  # the form again, with the error
    assert "a channel reads only" in answer.content.decode()
    assert snapshot() == before


@pytest.fixture
def receiver():
    from tests.notifications.conftest import Receiver

    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


@pytest.mark.parametrize("reference", ["${SECRET_KEY}", "file:/proc/self/environ"])
def test_a_channel_stored_before_the_limits_sends_nothing_when_an_admin_tests_it(
    client, world, user_for, receiver, reference, monkeypatch
):
    # Rows written before the limits existed skip the form's checks.
    monkeypatch.setenv("SECRET_KEY", "the-server-key")
    stored = Channel.objects.create(
        name="old-hook", kind="webhook", url=receiver.url, headers={"X-Key": reference}
    )
    client.force_login(user_for("admin"))

    answer = client.post(reverse("admin:notifications_channel_test", args=[stored.pk]))

    assert answer.status_code == 302
    shown = " ".join(str(message) for message in get_messages(answer.wsgi_request))
    assert "test notification failed: configuration: headers: X-Key: " in shown
    assert "a channel reads only" in shown
    assert receiver.received == []
    assert "the-server-key" not in str(list(AuditEvent.objects.values("data")))
