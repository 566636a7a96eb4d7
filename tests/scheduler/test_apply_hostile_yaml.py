"""Hostile apply documents: YAML anchors and aliases (an alias bomb expands
a few hundred bytes into gigabytes), documents past the size bound, and
huge values quoted in errors. Each is refused with a short error, through
`manage.py apply` and `POST /api/v1/apply`, and nothing is written."""

import datetime as dt
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from calendars.models import Calendar
from scheduler.apply import document as applyfile
from scheduler.apply.document import MAX_DOCUMENT_CHARS, ApplyError, parse
from scheduler.models import Job
from tests.control.keyed_client import KeyedClient

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)


def alias_bomb(levels=6):
    """About 430 bytes: anchors in a job's env, each a list of nine aliases
    of the one before, and a timeout that names the last. A loader that
    expands aliases builds 9**levels strings, and the timeout's error
    quotes them all."""
    nine = ",".join(['"lol"'] * 9)
    anchors = [f"      L0: &l0 [{nine}]"]
    for level in range(1, levels):
        aliases = ",".join([f"*l{level - 1}"] * 9)
        anchors.append(f"      L{level}: &l{level} [{aliases}]")
    return (
        "jobs:\n"
        "  - name: bomb\n"
        '    schedule: "* * * * *"\n'
        "    command: 'true'\n"
        "    env:\n" + "\n".join(anchors) + f"\n    timeout: *l{levels - 1}\n"
    )


BOMB = alias_bomb()


def post_yaml(client, text):
    api = KeyedClient(client, ["jobs:write", "calendars:write"])
    return api.client.post(
        "/api/v1/apply",
        data=text.encode(),
        content_type="application/yaml",
        HTTP_AUTHORIZATION=f"Bearer {api.secret}",
    )


def test_an_alias_bomb_is_refused_through_the_api_with_a_small_answer(client):
    assert len(BOMB) < 500
    answer = post_yaml(client, BOMB)

    assert answer.status_code == 422, answer.content[:300]
    assert len(answer.content) < 500
    detail = answer.json()["detail"]
    assert detail.startswith("not valid YAML: an anchor at line 6, column 11: ")
    assert not Job.objects.exists()


def test_an_alias_bomb_is_refused_by_the_command_naming_line_and_column(tmp_path):
    path = tmp_path / "croniq.yaml"
    path.write_text(BOMB)
    err = StringIO()

    with pytest.raises(CommandError, match="nothing applied"):
        call_command("apply", str(path), stdout=StringIO(), stderr=err)

    assert len(err.getvalue()) < 500
    assert "an anchor at line 6, column 11" in err.getvalue()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("calendars:\n  - &c {name: workdays}\n", "an anchor at line 2, column 5"),
        ("jobs:\n  - name: x\n    labels: *nothing\n", "an alias at line 3, column 13"),
    ],
)
def test_any_anchor_or_alias_is_refused(text, where):
    with pytest.raises(ApplyError) as refused:
        parse(text, "YAML")

    assert refused.value.errors == [
        f"not valid YAML: {where}: anchors and aliases (&name, *name) are not accepted, "
        "write the value out"
    ]


def test_a_document_past_the_bound_is_refused_unread(tmp_path):
    text = "jobs: []\n" + "#" * MAX_DOCUMENT_CHARS
    path = tmp_path / "big.yaml"
    path.write_text(text)

    with pytest.raises(ApplyError, match=r"too large: 2,621,449 bytes, at most 2,621,440"):
        applyfile.load(path)
    with pytest.raises(ApplyError, match=r"document too large: 2,621,449 characters"):
        parse(text, "YAML")


def test_a_huge_value_is_quoted_cut_short_in_the_error():
    document = {
        "calendars": [{"name": "c", "daily_window": {"start": "9" * 100_000, "end": "10:00"}}],
        "jobs": [{"name": "j", "schedule": "* * * * *", "command": "x", "jitter": "x" * 100_000}],
    }

    with pytest.raises(ApplyError) as refused:
        applyfile.apply(document, now=NOW)

    quoted = "'" + "9" * 78 + "…"
    assert refused.value.errors[0] == (
        f'calendars[0].daily_window.start: {quoted} is not a time like "06:00"'
    )
    assert refused.value.errors[1].startswith("jobs[0].jitter: 'xxxx")
    assert all(len(e) < 200 for e in refused.value.errors)
    assert not Calendar.objects.exists() and not Job.objects.exists()


def test_an_error_from_a_model_check_is_cut_to_the_error_bound():
    document = {
        "jobs": [{"name": "j", "schedule": "* * * * *", "command": "x", "overlap": "o" * 10_000}]
    }

    with pytest.raises(ApplyError) as refused:
        applyfile.apply(document, now=NOW)

    assert refused.value.errors[0].startswith("jobs[0].overlap: ")
    assert len(refused.value.errors[0]) == 500
    assert refused.value.errors[0].endswith("…")
