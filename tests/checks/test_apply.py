"""The `checks:` section of an apply file (docs/design.md §5, §12): checked
by `checks.items` with errors naming the item and field, all or nothing,
managed by the file that wrote them (`--prune` deletes only its own), a
dry run plans without writing, and a check's token is never written,
planned, printed or audited."""

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
import yaml
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from checks import pings, states
from checks.models import Check
from scheduler.apply.document import ApplyError, apply, plan
from scheduler.models import Job
from tests.checks.factories import CheckFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
BACKUP = {
    "name": "backup",
    "schedule": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "grace": "15m",
    "description": "The nightly backup on db1",
    "labels": ["host:db1"],
}
HEARTBEAT = {"name": "heartbeat", "period": "5m"}
DOCUMENT = {"checks": [BACKUP, HEARTBEAT]}


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def written(document, source="croniq", **options):
    return apply(document, now=NOW, source=source, managed_source=source, **options)


def snapshot():
    return [list(m.objects.order_by("pk").values()) for m in (Check, Job, AuditEvent)]


def test_it_creates_checks_with_their_fields_as_the_file_says():
    changes = written(DOCUMENT)

    assert [(c.action, c.kind, c.name) for c in changes] == [
        ("create", "check", "backup"),
        ("create", "check", "heartbeat"),
    ]
    backup = Check.objects.get(name="backup")
    assert (backup.schedule, backup.timezone, backup.period, backup.grace) == (
        "30 2 * * *",
        "Europe/Berlin",
        None,
        900,
    )
    assert (backup.description, backup.labels) == ("The nightly backup on db1", ["host:db1"])
    assert (backup.state, backup.managed_by, backup.managed_source) == ("new", "apply", "croniq")
    heartbeat = Check.objects.get(name="heartbeat")
    assert (heartbeat.schedule, heartbeat.period, heartbeat.grace) == ("", 300, 60)
    assert len(backup.token) == 43 and backup.token != heartbeat.token


def test_applying_the_same_file_again_changes_nothing():
    written(DOCUMENT)
    tokens = dict(Check.objects.values_list("name", "token"))

    changes = written(DOCUMENT)

    assert {c.action for c in changes} == {"unchanged"}
    assert dict(Check.objects.values_list("name", "token")) == tokens


def test_an_update_keeps_the_token_the_pings_and_moves_the_deadlines():
    written({"checks": [HEARTBEAT]})
    check = Check.objects.get()
    pinged = NOW - dt.timedelta(minutes=1)
    pings.record(pings.Received(token=check.token, kind=states.SUCCESS, at=pinged))
    check.refresh_from_db()
    assert check.next_expected_at == pinged + dt.timedelta(minutes=5)

    [change] = written({"checks": [{**HEARTBEAT, "period": "1h", "description": "every hour"}]})

    assert (change.action, sorted(change.diff)) == ("update", ["description", "period"])
    assert change.diff["period"] == [300, 3600]
    after = Check.objects.get()
    assert after.token == check.token and after.pings.count() == 1
    assert (after.state, after.last_ping_at) == ("up", pinged)
    assert after.next_expected_at == pinged + dt.timedelta(hours=1)
    assert after.down_at == pinged + dt.timedelta(hours=1, minutes=1)


def test_a_changed_description_leaves_the_state_a_ping_wrote():
    written({"checks": [HEARTBEAT]})
    check = Check.objects.get()
    pings.record(pings.Received(token=check.token, kind=states.FAIL, at=NOW))

    written({"checks": [{**HEARTBEAT, "description": "now described"}]})

    after = Check.objects.get()
    assert (after.state, after.last_ping_at, after.n_pings) == ("down", NOW, 1)


def test_a_pause_is_the_operators_and_apply_leaves_it():
    written({"checks": [HEARTBEAT]})
    Check.objects.update(state=states.PAUSED)

    changes = written({"checks": [{**HEARTBEAT, "grace": 120}]})

    assert [c.action for c in changes] == ["update"]
    assert Check.objects.get().state == states.PAUSED


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({**HEARTBEAT, "grace": "soon"}, "checks[2].grace: 'soon' is not a duration"),
        ({**HEARTBEAT, "grace": 400 * 24 * 3600}, "checks[2].grace: at most 31622400 seconds"),
        ({**HEARTBEAT, "period": 0}, "checks[2].period: must be at least 1 second(s)"),
        ({"name": "x", "schedule": "0 3 * * *", "period": 60}, "checks[2].schedule: give either"),
        ({"name": "x"}, "checks[2].schedule: give either"),
        ({"name": "x", "schedule": "0 0 30 2 *"}, "checks[2].schedule: "),
        ({"name": "x", "schedule": "@every 5m"}, "checks[2].schedule: @every is not a check"),
        ({**BACKUP, "name": "x", "timezone": "Mars/Base"}, "checks[2].timezone: 'Mars/Base'"),
        ({**HEARTBEAT, "name": "x", "labels": "db"}, "checks[2].labels: expected a list"),
        ({**HEARTBEAT, "name": "no spaces"}, "checks[2].name: 'no spaces' is not a name"),
        ({**HEARTBEAT, "name": "x", "token": "mine"}, "checks[2]: unknown field(s): token"),
        ({**HEARTBEAT, "name": "x", "paused": True}, "checks[2]: unknown field(s): paused"),
        (
            {**HEARTBEAT, "name": "x", "project": "nowhere"},
            "checks[2].project: no project named 'nowhere'",
        ),
        ({**HEARTBEAT, "name": "backup"}, "checks[2].name: 'backup' is listed twice"),
        ("heartbeat", "checks[2]: expected a mapping"),
    ],
)
def test_a_bad_field_is_refused_naming_it_and_the_document_changes_nothing(item, error):
    written({"checks": [{**HEARTBEAT, "name": "kept"}]})
    before = snapshot()
    document = {
        "jobs": [{"name": "report", "schedule": "@daily", "command": "true"}],
        "checks": [BACKUP, {**HEARTBEAT, "name": "kept", "grace": 5}, item],
    }

    with pytest.raises(ApplyError) as refused:
        written(document, prune=True)

    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors
    assert snapshot() == before


def test_a_dry_run_plans_creates_and_updates_and_writes_nothing():
    written({"checks": [HEARTBEAT]})
    before = snapshot()

    changes = written({"checks": [BACKUP, {**HEARTBEAT, "grace": 90}]}, dry_run=True)

    assert [(c["action"], c["kind"], c["name"]) for c in plan(changes)] == [
        ("create", "check", "backup"),
        ("update", "check", "heartbeat"),
    ]
    assert plan(changes)[1]["diff"] == {"grace": [60, 90]}
    assert snapshot() == before


def test_prune_deletes_only_the_checks_this_file_manages():
    written({"checks": [HEARTBEAT, {**HEARTBEAT, "name": "gone"}]}, source="croniq")
    written({"checks": [{**HEARTBEAT, "name": "theirs"}]}, source="other")
    CheckFactory(name="made-by-api", managed_by="api")
    CheckFactory(name="made-in-admin", managed_by="admin")

    changes = written({"checks": [HEARTBEAT]}, source="croniq", prune=True)

    assert [(c.action, c.name) for c in changes if c.action != "unchanged"] == [("delete", "gone")]
    assert sorted(Check.objects.values_list("name", flat=True)) == [
        "heartbeat",
        "made-by-api",
        "made-in-admin",
        "theirs",
    ]


def test_without_prune_a_check_the_file_no_longer_names_stays():
    written(DOCUMENT)
    written({"checks": [HEARTBEAT]})
    assert Check.objects.count() == 2


def test_a_check_made_through_the_api_is_taken_over_by_the_file_that_lists_it():
    CheckFactory(name="heartbeat", period=300, grace=60, managed_by="api")

    [change] = written({"checks": [HEARTBEAT]})

    assert (change.action, sorted(change.diff)) == ("update", ["managed_by", "managed_source"])
    assert Check.objects.get().managed_source == "croniq"


def test_the_token_is_never_in_the_plan_the_output_or_the_audit_trail(tmp_path):
    written({"checks": [HEARTBEAT]})
    token = Check.objects.get().token
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"checks": [BACKUP, {**HEARTBEAT, "grace": 90}]}))
    shown = StringIO()

    for args in ([], ["--json"], ["--dry-run"], ["--dry-run", "--json"], ["--prune"]):
        call_command("apply", str(path), *args, stdout=shown, stderr=shown)

    tokens = list(Check.objects.values_list("token", flat=True))
    assert len(tokens) == 2 and token in tokens
    everything = shown.getvalue() + json.dumps(list(AuditEvent.objects.values("data")))
    for secret in tokens:
        assert secret not in everything
    assert "check backup" in shown.getvalue() and "check heartbeat" in shown.getvalue()


def test_each_change_is_audited_as_a_check_event():
    written(DOCUMENT)
    written({"checks": [HEARTBEAT]}, prune=True)

    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "data__name"))
    assert actions == [
        ("check.created", "backup"),
        ("check.created", "heartbeat"),
        ("check.deleted", "backup"),
    ]


def test_the_command_names_the_bad_field(tmp_path):
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"checks": [{**HEARTBEAT, "grace": "soon"}]}))
    err = StringIO()
    with pytest.raises(CommandError, match="nothing applied"):
        call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert "checks[0].grace: 'soon' is not a duration" in err.getvalue()
    assert not Check.objects.exists()


def test_the_export_writes_checks_without_tokens_and_names_the_paused_ones():
    from scheduler.apply.document import parse
    from scheduler.apply.export import export

    written(DOCUMENT)
    Check.objects.filter(name="heartbeat").update(state=states.PAUSED)
    result = export()

    assert parse(result.text(), "YAML")["checks"] == [
        {**BACKUP, "grace": 900},
        {"name": "heartbeat", "period": 300},
    ]
    for token in Check.objects.values_list("token", flat=True):
        assert token not in result.text()
    assert result.warnings == [
        "checks paused here, not in the document (a pause is an operator's state, which "
        "apply leaves alone): heartbeat; applied to a new database, they are not paused"
    ]


def test_the_stored_checks_are_read_together_not_one_query_each(django_assert_max_num_queries):
    many = {"checks": [{"name": f"host-{n}", "period": 300} for n in range(60)]}
    written(many)

    with django_assert_max_num_queries(10):
        changes = written(many)

    assert {c.action for c in changes} == {"unchanged"}
