"""The execution page of a running run whose runner has gone silent says
so, as does the JSON its script polls; the live dot stands still."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from scheduler.models import Execution

from .conftest import NOW

SILENT = "runner silent 23 s; lease expires in 7 s; it will be retried"


@pytest.fixture
def run_of(make_job, make_execution, make_runner, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 10.0

    def make(seen_seconds_ago, lease_left=7):
        runner = make_runner("web-1", last_seen_at=NOW - timedelta(seconds=seen_seconds_ago))
        return make_execution(
            make_job("nightly"),
            NOW - timedelta(minutes=1),
            state=Execution.RUNNING,
            runner=runner,
            lease=1,
            claimed_at=NOW - timedelta(seconds=50),
            lease_expires_at=NOW + timedelta(seconds=lease_left),
        )

    return make


def page(client, execution):
    with time_machine.travel(NOW, tick=False):
        return client.get(reverse("dashboard:execution", args=[execution.pk])).content.decode()


def polled(client, execution):
    with time_machine.travel(NOW, tick=False):
        return client.get(reverse("dashboard:execution-log", args=[execution.pk])).json()


def liveness_line(html):
    return re.search(r"<p class=\"liveness\"([^>]*)>(.*?)</p>", html, re.S).groups()


def indicator(html):
    return re.search(r'<span class="(live[^"]*)" data-live-indicator>(.*?)</span>', html).groups()


def test_a_run_of_a_silent_runner_says_so_and_its_dot_stands_still(staff_client, run_of):
    execution = run_of(23)
    html = page(staff_client, execution)
    attributes, text = liveness_line(html)
    assert text == SILENT
    assert 'data-kind="silent"' in attributes and "hidden" not in attributes
    assert indicator(html) == ("live live-stalled", "runner silent")

    body = polled(staff_client, execution)
    assert body["live"] is True
    assert body["liveness"] == {"kind": "silent", "label": "runner silent", "text": SILENT}


def test_a_run_of_a_runner_that_speaks_shows_a_live_dot(staff_client, run_of):
    execution = run_of(17)  # a heartbeat late: not silent
    html = page(staff_client, execution)
    attributes, text = liveness_line(html)
    assert "hidden" in attributes and text == ""
    assert indicator(html) == ("live", "live")
    assert polled(staff_client, execution)["liveness"] is None


def test_a_finished_run_says_nothing_of_its_runner(staff_client, run_of):
    execution = run_of(600)
    Execution.objects.filter(pk=execution.pk).update(state=Execution.LOST)
    html = page(staff_client, execution)
    assert "data-liveness" not in html and "data-live-indicator" not in html
    assert polled(staff_client, execution)["liveness"] is None
