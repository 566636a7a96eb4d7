"""check.down and check.up through the notification rules (docs/design.md
§9, §12): `checks: "glob"` selects them, throttling is per check, check.up
always goes out, and the body carries the check."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
import yaml
from django.core.management import call_command

from checks import evaluation, pings, states
from checks.models import Check
from notifications import routing
from notifications.models import Channel, Notification, Rule
from tests.checks.factories import CheckFactory

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def ping(check: Check, when: datetime, kind: str = states.SUCCESS) -> None:
    assert pings.record(pings.Received(token=check.token, kind=kind, at=when)) == pings.FOUND


def rule(name, events, **fields):
    channel, _ = Channel.objects.get_or_create(
        name="ops-hook", defaults={"kind": "webhook", "url": "https://hooks.example.com/x"}
    )
    made = Rule.objects.create(name=name, events=events, **fields)
    made.channels.set([channel])
    return made


def routed(now):
    routing.route_pending(now)
    return list(Notification.objects.order_by("created_at", "rule__name"))


def test_a_rule_s_checks_glob_selects_check_events(settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    rule("backups", ["check.down", "check.up"], checks="backup-*")
    rule("billing-jobs", ["check.down"], jobs="billing-*")
    rule("everything", ["check.down"])
    backup = CheckFactory(name="backup-db", labels=["db"])
    other = CheckFactory(name="report")
    ping(backup, T0, states.FAIL)
    ping(other, T0, states.FAIL)

    made = routed(T0)
    assert sorted((n.rule.name, n.message["check"]["name"]) for n in made) == [
        ("backups", "backup-db"),
        ("everything", "backup-db"),
        ("everything", "report"),
    ]
    body = next(n for n in made if n.rule.name == "backups").message
    assert body["event"] == "check.down"
    assert body["summary"] == "check backup-db is down: a fail ping"
    assert body["check"] == {
        "name": "backup-db",
        "project": "default",
        "state": "down",
        "last_ping_at": T0.isoformat(),
    }
    assert body["url"].startswith("https://croniq.example.com/")
    assert "job" not in body


def test_a_checks_glob_never_selects_job_events():
    from notifications.recording import record_event
    from tests.factories import JobFactory

    rule("backups", ["job.missed"], checks="backup-*")
    record_event("job.missed", at=T0, job=JobFactory(name="backup-nightly"))
    assert routed(T0) == []


def test_a_rule_s_labels_select_checks_by_their_labels():
    rule("db", ["check.down"], labels=["db"])
    ping(CheckFactory(name="with-db", labels=["db", "eu"]), T0, states.FAIL)
    ping(CheckFactory(name="without"), T0, states.FAIL)
    assert [n.message["check"]["name"] for n in routed(T0)] == ["with-db"]


def test_the_loop_s_check_down_is_routed_with_its_reason():
    rule("all", ["check.down"])
    check = CheckFactory(name="nightly", period=3600, grace=60)
    ping(check, T0)
    evaluation.evaluate(at(61))
    [notification] = routed(at(61))
    assert notification.message["summary"] == "check nightly is down: no ping within its grace"


def test_the_throttle_holds_back_repeats_per_check_and_never_check_up():
    rule("all", ["check.down", "check.up"], throttle=3600)
    flaky, steady = CheckFactory(name="flaky"), CheckFactory(name="steady")
    ping(flaky, T0, states.FAIL)
    ping(steady, T0, states.FAIL)  # another check: not held back by flaky's
    routed(T0)
    ping(flaky, at(1))
    routed(at(1))
    ping(flaky, at(2), states.FAIL)
    made = routed(at(2))
    assert [(n.name, n.check_name, n.state) for n in made] == [
        ("check.down", "flaky", Notification.PENDING),
        ("check.down", "steady", Notification.PENDING),
        ("check.up", "flaky", Notification.PENDING),
        ("check.down", "flaky", Notification.SUPPRESSED),
    ]


def test_apply_files_name_the_checks_a_rule_selects(tmp_path):
    document = {
        "channels": [{"name": "ops-mail", "kind": "email", "to": ["ops@example.com"]}],
        "notify": [
            {
                "name": "backups",
                "events": ["check.down", "check.up"],
                "checks": "backup-*",
                "channels": ["ops-mail"],
            }
        ],
    }
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump(document))
    call_command("apply", str(path), stdout=StringIO(), stderr=StringIO())
    assert Rule.objects.get(name="backups").checks == "backup-*"
    document["notify"][0]["checks"] = "db-*"
    path.write_text(yaml.safe_dump(document))
    out = StringIO()
    call_command("apply", str(path), stdout=out, stderr=StringIO())
    assert '~ rule backups: checks\n    checks: "backup-*" -> "db-*"' in out.getvalue()


def test_the_admin_s_rule_form_takes_a_checks_glob():
    from notifications.admin_forms import RuleForm

    channel = Channel.objects.create(name="ops-mail", kind="email", to=["ops@example.com"])
    form = RuleForm(
        data={
            "name": "backups",
            "enabled": "on",
            "events": ["check.down", "check.up"],
            "checks": "backup-*",
            "failures_in_a_row": "1",
            "channels": [channel.pk],
            "throttle": "0",
        }
    )
    assert form.is_valid(), form.errors
    assert form.save().checks == "backup-*"


def test_a_storm_of_checks_going_down_is_one_grouped_incident(settings):
    """A host dies: its checks (labelled alike) all go down within the
    window. The first THRESHOLD go out alone, the rest fold into one
    incident.grouped that names them all when it closes."""
    from notifications import incidents

    settings.CRONIQ_INCIDENT_THRESHOLD = 2
    rule("all", ["check.down"])
    host = [CheckFactory(name=f"cron-{n}", labels=["host-a"], period=3600) for n in range(5)]
    elsewhere = CheckFactory(name="elsewhere", labels=["host-b"], period=3600)
    for check in [*host, elsewhere]:
        ping(check, T0)
    evaluation.evaluate(at(65))
    made = routed(at(65))
    states_by_check = {n.check_name: n.state for n in made if n.name == "check.down"}
    assert states_by_check == {
        "cron-0": Notification.PENDING,
        "cron-1": Notification.PENDING,
        "cron-2": Notification.GROUPED,
        "cron-3": Notification.GROUPED,
        "cron-4": Notification.GROUPED,
        "elsewhere": Notification.PENDING,  # another pool
    }
    [incident] = [n for n in made if n.name == incidents.INCIDENT]
    assert incident.pool == "checks:host-a"
    assert incidents.close_incidents(at(65) + incidents.window()) == 1
    incident.refresh_from_db()
    assert incident.state == Notification.PENDING
    assert incident.message["summary"].startswith("5 checks labelled `host-a` failed in")
    # Routed in one batch, at one instant: the order among them is the ids'.
    assert sorted(incident.message["details"]) == [f"cron-{n}: check.down" for n in range(5)]


def test_one_check_failing_again_and_again_is_no_storm(settings):
    settings.CRONIQ_INCIDENT_THRESHOLD = 1
    rule("all", ["check.down", "check.up"])
    check = CheckFactory(name="flaky", labels=["db"])
    for minute in range(0, 8, 2):
        ping(check, at(minute), states.FAIL)
        routed(at(minute))
        ping(check, at(minute + 1))
        routed(at(minute + 1))
    downs = Notification.objects.filter(name="check.down")
    assert set(downs.values_list("state", flat=True)) == {Notification.PENDING}
    assert not Notification.objects.filter(name="incident.grouped").exists()
