"""The overview's job filters (docs/design.md §17): `?q=`, `?tag=`,
`?label=`, `?owner=`, `?project=` and `?state=`, alone and together, kept
in the page's links; text no database can search for is a 400 naming it."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from scheduler.models import Execution, JobHealth

from .conftest import NOW
from .test_pages import OVERVIEW_QUERIES


@pytest.fixture(autouse=True)
def at_now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def world(make_job, make_execution, make_runner):
    make_runner("web-1", labels=["linux"])
    make_job("invoice", tags=["billing", "nightly"], labels=["linux"], owner="team-money")
    make_job("refund", tags=["billing"], owner="team-money", paused_at=NOW, pause_reason="x")
    make_job("backup", tags=["nightly"], labels=["linux", "disk"], owner="team-ops")
    make_job("retired", enabled=False, owner="team-ops")
    make_job("broken", error="cannot evaluate", error_at=NOW)
    failing = make_job("flaky", tags=["nightly"])
    JobHealth.objects.create(job=failing, failure_streak=3, failing_since=NOW)
    busy = make_job("long-run", labels=["gpu"])
    make_execution(busy, NOW, state=Execution.RUNNING)
    waits = make_job("train", labels=["gpu"])
    make_execution(waits, NOW - timedelta(minutes=1), state=Execution.PENDING)


def listed(client, **params):
    html = client.get(reverse("dashboard:overview"), params).content.decode()
    return re.findall(r'<tr data-job="([^"]+)"', html)


EVERY = ["backup", "broken", "flaky", "invoice", "long-run", "refund", "retired", "train"]


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({}, EVERY),
        ({"q": "IN"}, ["invoice", "train"]),
        ({"tag": "billing"}, ["invoice", "refund"]),
        ({"tag": "nightly"}, ["backup", "flaky", "invoice"]),
        ({"tag": "bill"}, []),  # a whole tag, not a part of one
        ({"label": "linux"}, ["backup", "invoice"]),
        ({"label": "disk"}, ["backup"]),
        ({"owner": "team-ops"}, ["backup", "retired"]),
        ({"owner": "team"}, []),  # the whole owner
        ({"project": "default"}, EVERY),
        ({"project": "payments"}, []),
        ({"state": "active"}, ["backup", "flaky", "invoice", "long-run", "train"]),
        ({"state": "paused"}, ["refund"]),
        ({"state": "disabled"}, ["retired"]),
        ({"state": "error"}, ["broken"]),
        ({"state": "failing"}, ["flaky"]),
        ({"state": "running"}, ["long-run"]),
        ({"state": "waiting"}, ["train"]),
        ({"state": "bogus"}, EVERY),  # a page shows every state instead
        ({"show": "paused"}, ["refund"]),  # the state's older name
        ({"tag": "nightly", "label": "linux"}, ["backup", "invoice"]),
        ({"tag": "billing", "state": "paused", "owner": "team-money"}, ["refund"]),
        ({"tag": "nightly", "q": "inv", "project": "default"}, ["invoice"]),
    ],
)
def test_each_filter_alone_and_together(staff_client, world, params, names):
    assert listed(staff_client, **params) == names


def test_the_filters_stay_in_the_form_and_every_link(staff_client, world, make_job):
    for i in range(60):  # a second page
        make_job(f"more-{i:02}", tags=["nightly"])
    params = {"tag": "nightly", "label": "", "owner": "", "state": "active"}
    html = staff_client.get(reverse("dashboard:overview"), params).content.decode()
    assert 'name="tag" value="nightly"' in html
    assert '<option value="active" selected>' in html
    # The pager, the state links and the clear link keep or drop them as said.
    assert 'href="?tag=nightly&amp;state=active&amp;page=2"' in html
    assert 'href="?tag=nightly&amp;state=paused"' in html
    assert 'href="?tag=nightly"' in html  # "all" states
    assert "data-clear-filters" in html
    # A row's tag and owner lead to the list filtered by them, the rest kept.
    assert 'href="?tag=billing&amp;state=active" data-tag' in html
    assert 'href="?tag=nightly&amp;owner=team-money&amp;state=active"' in html


def test_the_form_suggests_the_tags_labels_and_owners_in_use(staff_client, world):
    html = staff_client.get(reverse("dashboard:overview")).content.decode()
    tags = re.search(r'<datalist id="known-tags">(.*?)</datalist>', html).group(1)
    assert re.findall(r'value="([^"]+)"', tags) == ["nightly", "billing"]  # most used first
    owners = re.search(r'<datalist id="known-owners">(.*?)</datalist>', html).group(1)
    assert re.findall(r'value="([^"]+)"', owners) == ["team-money", "team-ops"]


def test_no_match_says_which_filter(staff_client, world):
    html = staff_client.get(reverse("dashboard:overview"), {"tag": "gone"}).content.decode()
    assert "No job matches tag &#x27;gone&#x27;." in html


@pytest.mark.parametrize("key", ["q", "tag", "label", "owner", "project", "state"])
def test_text_no_database_can_search_for_is_a_400_naming_the_filter(staff_client, world, key):
    answer = staff_client.get(reverse("dashboard:overview"), {key: "a\x00b"})
    assert answer.status_code == 400
    assert answer.content.decode().startswith(f"{key}: ")


def test_a_filter_too_long_to_match_anything_is_a_400(staff_client, world):
    answer = staff_client.get(reverse("dashboard:overview"), {"owner": "x" * 201})
    assert answer.status_code == 400
    assert answer.content.decode() == "owner: at most 200 characters"


def test_a_filtered_overview_reads_no_more_than_the_plain_one(
    staff_client, world, django_assert_max_num_queries
):
    params = {"tag": "nightly", "label": "linux", "owner": "team-ops", "state": "running"}
    with django_assert_max_num_queries(OVERVIEW_QUERIES):
        assert staff_client.get(reverse("dashboard:overview"), params).status_code == 200
