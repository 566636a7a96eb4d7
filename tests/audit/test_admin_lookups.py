"""What a view-only user may ask an admin list: the filters of its sidebar and
a search over fields it shows. Any other lookup in the query string
(?url__startswith=, ?env__DB_PASSWORD__startswith=) is refused with the
admin's 400 and filters nothing, so a value masked or hashed on the pages
cannot be recovered a character at a time. Every registered admin is walked,
so an admin added later is held to the same rule."""

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib import admin
from django.contrib.admin import widgets
from django.contrib.auth.models import Permission
from django.db.models.constants import LOOKUP_SEP
from django.test import RequestFactory
from django.urls import reverse

from audit.models import AuditEvent, Counter, Heartbeat
from control.models import ApiKey
from core.admin_mixins import ReadOnlyModelAdmin
from notifications.models import Channel, Delivery, Mute, Notification, Rule
from runners.models import RunnerToken
from scheduler.models import ConcurrencyGroup, Execution, Job, MaintenanceWindow
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import CalendarFactory, ExecutionFactory, JobFactory, RunnerFactory

pytestmark = [
    pytest.mark.django_db,
    # The test settings have no collected static files; whitenoise only warns.
    pytest.mark.filterwarnings("ignore:No directory at:UserWarning"),
]

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
SLACK_URL = "https://hooks.slack.com/services/T0SECRET/B0SECRET/xyzSECRETxyz"
DB_PASSWORD = "pw-s3cret-value"

# Values a viewer never reads in the clear: masked on the page, stored hashed,
# or kept for the runners only.
SECRET_FIELDS = {
    "auth.user.password",
    "control.apikey.secret_hash",
    "runners.runnertoken.secret_hash",
    "notifications.channel.url",
    "notifications.channel.headers",
    "notifications.channel.secret",
    "scheduler.job.env",
    "scheduler.execution.env",
}
# A field added later with a name like these is taken for a secret too.
SECRET_LOOKING = re.compile(r"secret|password|hash|token|headers|url|^env$")

REGISTERED = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)
REGISTERED_IDS = [model._meta.label for model, _ in REGISTERED]


@pytest.fixture
def viewer(client, django_user_model):
    """A staff user who may view every model and change none."""
    user = django_user_model.objects.create_user("viewer", password=None, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    client.force_login(user)
    return user


@pytest.fixture
def world(django_user_model):
    """A row of every model an admin lists, the secrets among them."""
    job = JobFactory(name="nightly", env={"DB_PASSWORD": DB_PASSWORD, "REPORT_DIR": "/srv"})
    job.calendar = CalendarFactory(name="ops")
    job.concurrency_group = ConcurrencyGroup.objects.create(name="db", max_concurrent=2)
    job.save()
    execution = ExecutionFactory(job=job, state=Execution.FAILED, env={"API_TOKEN": "tok-s3cret"})
    channel = Channel.objects.create(
        name="alerts", kind="slack", url=SLACK_URL, headers={"Authorization": "Bearer s3cret"}
    )
    rule = Rule.objects.create(name="failures", events=["job.failing"])
    rule.channels.add(channel)
    notification = Notification.objects.create(
        name="job.failing", channel=channel, job=job, rule=rule, created_at=NOW
    )
    Delivery.objects.create(notification=notification, attempt=1, at=NOW, ok=False, latency=0.1)
    Mute.objects.create(job=job, until=NOW, note="deploy", created_at=NOW)
    DeadLetter.objects.create(execution=execution, reason="failed", landed_at=NOW)
    MaintenanceWindow.objects.create(start=NOW, end=NOW + timedelta(hours=1), reason="upgrade")
    AuditEvent.objects.create(at=NOW, action="job.changed", target_repr="nightly")
    Counter.objects.create(name="croniq_fired_total", value=1)
    Heartbeat.objects.create(name="loop", at=NOW)
    runner = RunnerFactory(name="build-1")
    ApiKey.issue("ci", ["jobs:read"])
    django_user_model.objects.create_user("alice", password="correct horse battery")
    return {"job": job, "channel": channel, "runner": runner}


def changelist(model):
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def refused(answer):
    """The admin's refusal of a lookup: 400, or (a page that is no list) a
    redirect that carries no filter."""
    if answer.status_code == 302:
        return "?" not in answer["Location"]
    return answer.status_code == 400


def filtered_paths(model_admin):
    """The field paths the admin's sidebar filters on."""
    paths = set()
    for item in model_admin.list_filter:
        if isinstance(item, (list, tuple)):
            paths.add(item[0])
        elif isinstance(item, str):
            paths.add(item)
    return paths


# -- the secrets ---------------------------------------------------------------


def secret_lookups(world, django_user_model):
    token = world["runner"].token
    key = ApiKey.objects.get(name="ci")
    alice = django_user_model.objects.get(username="alice")
    return [
        (Channel, "alerts", "url__startswith", SLACK_URL[:40]),
        (Channel, "alerts", "url__regex", "T0SECRET"),
        (Channel, "alerts", "headers__Authorization__startswith", "Bearer s"),
        (Job, "nightly", "env__DB_PASSWORD__startswith", DB_PASSWORD[:4]),
        (Execution, "nightly", "env__API_TOKEN__startswith", "tok-"),
        (RunnerToken, token.name, "secret_hash__startswith", token.secret_hash[:3]),
        (ApiKey, "ci", "secret_hash__startswith", key.secret_hash[:3]),
        (type(alice), "alice", "password__startswith", alice.password[:10]),
    ]


def test_a_viewer_cannot_match_a_secret_through_a_lookup(client, viewer, world, django_user_model):
    for model, shown, lookup, prefix in secret_lookups(world, django_user_model):
        url = changelist(model)
        # The row is in the viewer's list: a lookup that matched would show it.
        assert shown in client.get(url).content.decode(), model
        matching = client.get(url, {lookup: prefix})
        assert matching.status_code == 400, (model, lookup)
        assert shown not in matching.content.decode()
        # A wrong guess is answered the same: there is nothing to tell apart.
        assert client.get(url, {lookup: "not-it"}).status_code == 400


def test_searching_a_channel_by_its_webhook_url_finds_nothing(client, viewer, world):
    answer = client.get(changelist(Channel), {"q": "T0SECRET"})
    assert answer.status_code == 200
    assert list(answer.context["cl"].result_list) == []
    assert client.get(changelist(Channel), {"q": "alerts"}).context["cl"].result_count == 1


# -- every admin ----------------------------------------------------------------


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_every_admin_refuses_a_lookup_on_a_field_it_does_not_filter_on(
    client, viewer, world, model, model_admin
):
    request = RequestFactory().get("/")
    request.user = viewer
    unfiltered = [
        f.name for f in model._meta.concrete_fields if f.name not in filtered_paths(model_admin)
    ]
    assert unfiltered
    for name in unfiltered:
        lookup = f"{name}__isnull"
        assert not model_admin.lookup_allowed(lookup, "False", request), lookup
        assert refused(client.get(changelist(model), {lookup: "False"})), lookup


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_no_admin_searches_a_secret(model, model_admin):
    for search_field in model_admin.search_fields:
        current = model
        for part in search_field.lstrip("^=@").split(LOOKUP_SEP):
            field = current._meta.get_field(part)
            label = f"{current._meta.label_lower}.{field.name}"
            assert label not in SECRET_FIELDS, search_field
            if not field.is_relation:
                break
            current = field.related_model
        assert not SECRET_LOOKING.search(field.name), search_field


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_every_filter_of_every_admin_still_filters(admin_client, world, model, model_admin):
    page = admin_client.get(changelist(model))
    if page.status_code == 302:
        return  # a page of its own rather than a list (the maintenance switch)
    assert page.status_code == 200
    cl = page.context["cl"]
    for spec in cl.filter_specs:
        for choice in spec.choices(cl):
            answer = admin_client.get(changelist(model) + choice["query_string"])
            assert answer.status_code == 200, (spec.title, choice["query_string"])


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=REGISTERED_IDS)
def test_raw_id_popups_still_open(admin_client, world, model, model_admin):
    for name in model_admin.raw_id_fields:
        field = model._meta.get_field(name)
        widget = widgets.ForeignKeyRawIdWidget(field.remote_field, admin.site)
        answer = admin_client.get(
            changelist(field.related_model), {**widget.url_parameters(), "_popup": "1"}
        )
        assert answer.status_code == 200, name
        assert answer.context["cl"].result_count >= 1


def test_the_date_hierarchy_of_an_admin_may_be_used():
    class ByDay(ReadOnlyModelAdmin):
        date_hierarchy = "at"

    by_day = ByDay(AuditEvent, admin.site)
    request = RequestFactory().get("/")
    for lookup in ["at__year", "at__month", "at__day"]:
        assert by_day.lookup_allowed(lookup, "1", request)
    assert not by_day.lookup_allowed("at__hour", "1", request)
    assert not by_day.lookup_allowed("actor_name__startswith", "a", request)


def test_the_lookups_of_a_raw_id_popup_limited_by_limit_choices_to_are_allowed(monkeypatch):
    # What Django keeps for a ForeignKey to Job declared with
    # limit_choices_to={"owner": "data"}: its popup's URL carries owner=data.
    monkeypatch.setattr(Job._meta, "related_fkey_lookups", [{"owner": "data"}])
    job_admin = admin.site._registry[Job]
    request = RequestFactory().get("/")
    assert job_admin.lookup_allowed("owner", "data", request)
    assert not job_admin.lookup_allowed("owner", "dat", request)
    assert not job_admin.lookup_allowed("owner__startswith", "d", request)
