"""The audit page shows an event's changes as "field: old → new" and its other
data as key: value, never a secret's value (dashboard/audit_details.py)."""

import html
import re

import pytest
from django.urls import reverse

from audit.changes import MASK
from audit.models import AuditEvent
from dashboard.audit_details import MAX_VALUE_CHARS, details
from tests.dashboard.conftest import NOW


def details_text(client, action, data):
    """The text of the one event's Details cell, tags dropped, spaces squeezed."""
    AuditEvent.objects.create(at=NOW, action=action, actor_name="alice", data=data)
    page = client.get(reverse("dashboard:audit")).content.decode()
    cell = re.search(r'<dl class="details">(.*?)</dl>', page, re.S)
    assert cell, page
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", cell.group(1)).split()))


def test_an_admin_change_shows_one_line_per_field(staff_client):
    text = details_text(
        staff_client, "job.changed", {"schedule": ["0 6 * * *", "0 7 * * *"], "timeout": [60, 90]}
    )
    assert text == "schedule: 0 6 * * * → 0 7 * * * timeout: 60 → 90"


def test_a_creation_shows_the_missing_side_as_a_dash(staff_client):
    text = details_text(staff_client, "calendar.created", {"name": [None, "holidays"]})
    assert text == "name: — → holidays"


def test_an_apply_change_shows_its_diff_then_its_other_facts(staff_client):
    data = {"name": "report", "via": "apply", "diff": {"command": ["true", "python report.py"]}}
    text = details_text(staff_client, "job.changed", data)
    assert text == "command: true → python report.py name: report via: apply"


def test_other_data_is_a_compact_key_value_list(staff_client):
    data = {"from": "web-1", "executions": [70, 71], "lease": {"seconds": 30}}
    text = details_text(staff_client, "runner.takeover", data)
    assert text == 'executions: [70, 71] from: web-1 lease: {"seconds": 30}'


def test_pairs_under_an_action_that_is_no_change_are_not_read_as_a_diff(staff_client):
    text = details_text(staff_client, "runner.flapping", {"window": [1, 2]})
    assert text == "window: [1, 2]"


def test_a_masked_value_stays_masked(staff_client):
    env = [{"API_TOKEN": MASK, "REGION": "eu"}, {"API_TOKEN": MASK, "REGION": "us"}]
    text = details_text(staff_client, "job.changed", {"env": env})
    assert MASK in text
    assert "REGION" in text


@pytest.mark.parametrize(
    "data",
    [
        {"env": [None, {"API_TOKEN": "tok-leak-1"}]},
        {"diff": {"http": [None, {"headers": {"Authorization": "Bearer tok-leak-1"}}]}},
        {"diff": {"container": [None, {"env": {"DB_PASSWORD": "tok-leak-1"}}]}},
        {"name": "x", "env": {"SECRET": "tok-leak-1"}},
    ],
)
def test_a_secret_stored_unmasked_by_an_older_release_is_masked_on_the_page(staff_client, data):
    action = "job.changed" if "diff" in data or "name" not in data else "job.paused"
    text = details_text(staff_client, action, data)
    assert "tok-leak-1" not in text
    assert MASK in text


def test_a_value_is_escaped(staff_client):
    AuditEvent.objects.create(at=NOW, action="job.changed", data={"name": ["a", "<b>x</b>"]})
    page = staff_client.get(reverse("dashboard:audit")).content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<b>x</b>" not in page


def test_a_long_value_is_cut():
    [change] = details("job.changed", {"command": ["", "x" * 1000]}).changes
    assert len(change.new) == MAX_VALUE_CHARS
    assert change.new.endswith("…")


def test_no_data_shows_nothing():
    assert not details("runner.takeover", {})
