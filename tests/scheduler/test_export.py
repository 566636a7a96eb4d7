"""`croniq-admin export` (docs/design.md §5, §16): the whole configuration
as one apply document. Applied to an empty database it makes the same
configuration, and a dry run of it plans no change against either
database; secrets stay references, runtime state stays out."""

import datetime as dt
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command

from audit.recording import record
from calendars.models import Calendar, CalendarPeriod
from notifications.models import Channel, Mute
from scheduler.apply import sections
from scheduler.apply.document import apply, parse
from scheduler.apply.export import OLDER_NAMES, ExportError, export
from scheduler.apply.fields import REQUIRED
from scheduler.apply.reference import flattened
from scheduler.apply.reference import sections as apply_sections
from scheduler.models import ConcurrencyGroup, Job, MaintenanceWindow
from tests.factories import ExecutionFactory, JobFactory, RunnerFactory
from tests.scheduler.export_world import (
    CHAT_URL,
    NOW,
    SECRET_ENV,
    SOURCE,
    configuration,
    rich,
    wipe,
    with_secrets,
)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def secrets_dir(tmp_path, monkeypatch, settings):
    with_secrets(monkeypatch, settings, tmp_path)
    return tmp_path


@pytest.fixture
def source(db, secrets_dir):
    """The rich configuration, applied as the file `croniq` would be."""
    written(rich(secrets_dir))


def written(document, **options):
    return apply(document, now=NOW, managed_source=SOURCE, **{"source": SOURCE, **options})


def planned(document):
    """The changes a dry run of `document` plans: [] when it plans none."""
    changes = written(document, dry_run=True)
    return [(c.action, c.kind, c.name, sorted(c.diff)) for c in changes if c.action != "unchanged"]


def exported():
    """The export as the file reads back: its text, parsed as apply parses it."""
    return parse(export().text(), "YAML")


# -- every field of every section ------------------------------------------------------


def field_values(items, path):
    """The values at `path` ("holidays.country", "exclude[].start") in `items`."""
    head, _, rest = path.partition(".")
    values = []
    for item in items:
        if head.endswith("[]"):
            inner = item.get(head.removesuffix("[]")) or []
            values += field_values(inner, rest) if rest else inner
        elif head in item:
            values += field_values([item[head]], rest) if rest else [item[head]]
    return values


def uncovered(document, older=None):
    """The fields of apply's sections no item of `document` sets to a value
    other than their default ("jobs.max_queue"), `older` names aside."""
    missing = []
    for key, fields in apply_sections():
        for path, field in flattened(fields):
            if path in (older or {}).get(key, ()):
                continue
            values = field_values(document.get(key) or [], path)
            if not any(field.default is REQUIRED or v != field.default for v in values):
                missing.append(f"{key}.{path}")
    return missing


def test_the_rich_configuration_sets_every_apply_field(tmp_path):
    # A field added to apply fails here first: give it a value in export_world.rich.
    assert uncovered(rich(tmp_path)) == []


def test_the_export_writes_every_apply_field(source):
    # A field apply takes and the export leaves out fails here.
    assert uncovered(exported(), OLDER_NAMES) == []


# -- the round trip -------------------------------------------------------------------


def test_applied_to_an_empty_database_it_makes_the_same_configuration(source):
    before = configuration()
    document = exported()
    assert planned(document) == []  # against the database it came from

    wipe()
    assert configuration() == {model: [] for model in before}
    written(document)

    assert configuration() == before
    assert planned(document) == []  # against the new one
    assert parse(export().text(), "YAML") == document


def test_two_exports_of_one_configuration_are_the_same_text(source):
    assert export().text() == export().text()


def test_items_are_sorted_by_name_whatever_order_the_database_returns(db):
    # A locale collation (PostgreSQL's en_US) puts "a-c" between "ab" and "ad",
    # SQLite's and C's do not: the export sorts itself.
    names = ["ad", "a-c", "ab", "B", "a_b", "z9", "a0"]
    for name in names:
        JobFactory(name=name)

    newest_first = export(select=lambda rows: rows.order_by("-pk")).document
    assert [job["name"] for job in newest_first["jobs"]] == sorted(names)


def test_fields_at_their_default_are_left_out(db, secrets_dir):
    written(
        {
            "calendars": [{"name": "any-day"}],
            "concurrency_groups": [{"name": "pool", "max_concurrent": 1}],
            "jobs": [{"name": "tick", "schedule": "* * * * *", "command": "true"}],
            "channels": [{"name": "hook", "kind": "webhook", "url": "https://example.com/h"}],
            "notify": [{"name": "all", "events": ["job.failing"], "channels": ["hook"]}],
        }
    )

    assert export().text().split("\n", 3)[3] == (
        "calendars:\n"
        "- name: any-day\n"
        "concurrency_groups:\n"
        "- name: pool\n"
        "  max_concurrent: 1\n"
        "jobs:\n"
        "- name: tick\n"
        "  schedule: '* * * * *'\n"
        "  command: 'true'\n"
        "channels:\n"
        "- name: hook\n"
        "  kind: webhook\n"
        "  url: https://example.com/h\n"
        "notify:\n"
        "- name: all\n"
        "  events: [job.failing]\n"
        "  channels: [hook]\n"
    )


def test_an_empty_configuration_is_an_empty_document(db):
    text = export().text()

    assert text.endswith("\n{}\n")
    assert parse(text, "YAML") == {}


# -- secrets ----------------------------------------------------------------------------


def test_channel_secrets_stay_the_references_they_are(source, secrets_dir):
    text = export().text()
    channels = {c["name"]: c for c in parse(text, "YAML")["channels"]}

    assert channels["hook"]["secret"] == "${CRONIQ_SECRET_HOOK}"
    assert channels["hook"]["headers"]["Authorization"] == "Bearer ${CRONIQ_SECRET_TOKEN}"
    assert channels["chat"]["url"] == f"file:{secrets_dir / 'chat-url'}"
    for value in [*SECRET_ENV.values(), CHAT_URL]:
        assert value not in text


def test_secret_looking_env_values_are_written_as_stored_and_warned_about(source):
    result = export()

    nightly = next(job for job in result.document["jobs"] if job["name"] == "nightly")
    assert nightly["env"] == {"API_TOKEN": "t0k3n-as-stored", "REPORT_DIR": "/srv/reports"}
    assert list(nightly["env"]) == ["API_TOKEN", "REPORT_DIR"]  # sorted, on either database
    assert result.warnings == [
        "job nightly: env API_TOKEN is written out as stored and looks like a secret: "
        "do not commit the file as it is"
    ]


def test_the_command_prints_the_document_and_warns_on_stderr(source):
    out, err = StringIO(), StringIO()

    call_command("export", stdout=out, stderr=err)

    assert out.getvalue() == export().text()
    assert "warning: job nightly: env API_TOKEN is written out as stored" in err.getvalue()


# -- who manages a row, and what is not configuration ---------------------------------------


def test_rows_made_in_the_admin_or_the_api_are_exported_and_a_dry_run_shows_only_their_adoption(
    source,
):
    Job.objects.filter(name="page").update(managed_by="admin", managed_source="")
    ConcurrencyGroup.objects.update(managed_by="api", managed_source="")
    Channel.objects.filter(name="hook").update(managed_by="admin", managed_source="")
    made_in_admin = Calendar.objects.create(name="admins-own", weekdays=["sat", "sun"])
    CalendarPeriod.objects.create(
        calendar=made_in_admin, start_date=dt.date(2026, 8, 1), end_date=dt.date(2026, 8, 2)
    )
    before = configuration(ownership=False)
    document = exported()

    # Applying it would make apply (of this source) manage them: said, and nothing else.
    ownership = ["managed_by", "managed_source"]
    assert planned(document) == [
        ("update", "calendar", "admins-own", ownership),
        ("update", "concurrency_group", "warehouse", ownership),
        ("update", "job", "page", ownership),
        ("update", "channel", "hook", ownership),
    ]
    wipe()
    written(document)
    assert configuration(ownership=False) == before
    assert planned(document) == []


def test_a_pause_is_not_configuration_it_is_left_out_and_named(source):
    unpaused = export().text()
    Job.objects.filter(name="page").update(paused_at=NOW, pause_reason="vendor outage")
    result = export()

    assert result.text() == unpaused
    assert result.warnings[-1] == (
        "paused here, not in the document (a pause is an operator's state, which apply "
        "leaves alone): page; applied to a new database, they are not paused"
    )
    assert planned(parse(result.text(), "YAML")) == []  # apply leaves a pause as it is


def test_runtime_state_leaves_the_document_as_it_was(source):
    before = export().text()
    job = Job.objects.get(name="page")
    runner = RunnerFactory(labels=["linux"])
    ExecutionFactory(job=job, runner=runner)
    Job.objects.filter(pk=job.pk).update(
        next_run_at=NOW + dt.timedelta(days=3), error="cannot fire", error_at=NOW
    )
    Mute.objects.create(job=job, until=NOW + dt.timedelta(hours=1), note="noisy", created_at=NOW)
    MaintenanceWindow.objects.create(start=NOW, end=NOW + dt.timedelta(hours=2))
    record("job.paused", target=job, actor=("user", "ops"))

    assert export().text() == before


# -- text that is hard to write -----------------------------------------------------------

# Names are slugs; these read as something else in YAML when left unquoted.
TRICKY_NAMES = ["yes", "null", "on", "0x1F", "1_000", "2026-01-01", "12e3", "-", "_"]
TRICKY_TEXT = [
    "key: value # not a comment",
    "- a list?",
    "*alias &anchor !tag %directive @at `tick",
    "'single' and \"double\" quotes, {braces} [brackets] | > ? ~",
    "several\nlines\n\nwith a blank one\n",
    "  leading spaces\nand trailing ones  \n",
    "tab\there",
    "unicode: ü日本🎉, line separators\u2028and\u2029paragraphs, a NEL\x85too",
    "\ufeffa byte order mark",
    "---\n...\n",
]


def test_text_yaml_treats_specially_comes_back_as_it_was(db, secrets_dir):
    jobs = [
        {
            "name": name,
            "schedule": "@daily",
            "command": TRICKY_TEXT[i % len(TRICKY_TEXT)],
            "description": TRICKY_TEXT[(i + 1) % len(TRICKY_TEXT)],
            "owner": TRICKY_TEXT[(i + 2) % len(TRICKY_TEXT)],
            "labels": [TRICKY_TEXT[(i + 3) % len(TRICKY_TEXT)], name],
            "env": {"NOTE": TRICKY_TEXT[(i + 4) % len(TRICKY_TEXT)], "key: #x": name},
        }
        for i, name in enumerate(TRICKY_NAMES)
    ]
    jobs[0]["on_success"] = TRICKY_NAMES[1:3]
    written(
        {
            "calendars": [
                {
                    "name": "null",
                    "description": TRICKY_TEXT[0],
                    "exclude": [
                        {"start": "2026-06-01", "end": "2026-06-02", "label": TRICKY_TEXT[4]}
                    ],
                }
            ],
            "jobs": jobs,
            "channels": [
                {
                    "name": "on",
                    "kind": "slack",
                    "url": "https://chat.example.com/h?a=1#frag",
                    "username": "bot: #1 ü",
                }
            ],
            "notify": [
                {
                    "name": "yes",
                    "events": ["job.failing"],
                    "channels": ["on"],
                    "jobs": "night*: #[0-9]",
                    "owner": TRICKY_TEXT[7],
                    "calendar": "null",
                }
            ],
        }
    )
    before = configuration()
    document = exported()

    wipe()
    written(document)

    assert configuration() == before
    assert planned(document) == []


# -- sections apps add ---------------------------------------------------------------------


def test_a_section_an_app_adds_without_an_export_is_refused(db, monkeypatch):
    class Unexportable:
        def __init__(self, applier):
            pass

    monkeypatch.setattr(sections, "_sections", list(sections._sections))
    sections.add_sections(("extras",), Unexportable)

    with pytest.raises(ExportError, match=r"^the extras section\(s\) cannot be exported"):
        export()
