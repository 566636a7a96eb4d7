"""The real loop and web process together: a job's executions are created
and claimed ahead of their instant, and reach the runner at it, never
before."""

import datetime as dt
import time

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.processes import LAYOUTS, manage, start_loop, start_web_and_loop
from tests.e2e.protocol_client import RunnerClient, token

pytestmark = pytest.mark.e2e


def scheduled_epoch(assignment):
    return dt.datetime.fromisoformat(assignment["scheduled_for"].replace("Z", "+00:00")).timestamp()


@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_a_fired_job_reaches_its_runner_at_its_instant_never_before(layout, e2e_database, tmp_path):
    jobs = {
        "jobs": [
            {"name": "each-second", "schedule": "@every 1s", "command": "true", "labels": ["linux"]}
        ]
    }
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(jobs))
    manage(e2e_database, "apply", str(tmp_path / "jobs.yaml"))
    server, processes = start_web_and_loop(layout, e2e_database, tmp_path)
    runner = RunnerClient(server.url, token(e2e_database), labels=["linux"])
    delays = []
    try:
        assert runner.register().status_code == 200
        deadline = time.monotonic() + 30
        while len(delays) < 4 and time.monotonic() < deadline:
            for assignment in runner.claim(wait=5):
                delays.append(time.time() - scheduled_epoch(assignment))
                runner.finish(assignment["id"], assignment["lease"])
    finally:
        for process in reversed(processes):
            process.stop()

    assert len(delays) >= 4, [process.output() for process in processes]
    assert min(delays) >= 0, delays  # never before its instant


def test_dispatch_latency_on_metrics_runs_to_each_hand_over_not_to_the_claim_ahead(
    server, e2e_database, tmp_path
):
    """Work claimed ahead of its instant and answered at it waited from the
    instant to the answer leaving: a little, never 0 by construction. The
    web process writes the samples to the database; /metrics reads them."""
    apply_every_second(e2e_database, tmp_path)
    runner = RunnerClient(server.url, token(e2e_database), labels=["linux"])
    assert runner.register().status_code == 200

    loop = start_loop(e2e_database, tmp_path / "loop.log")
    try:
        # The instants that passed before the loop was up are due at once
        # (claimed late): measure the ones after the runner caught up,
        # claimed ahead while its poll waits.
        first = catch_up(runner)
        count_before, sum_before = wait_for_latency_samples(server.url, len(first))
        later = take(runner, 3)
        count_after, sum_after = wait_for_latency_samples(server.url, count_before + len(later))
    finally:
        loop.stop()

    assert len(later) == 3, loop.output()
    assert count_after - count_before == len(later)
    measured = sum_after - sum_before
    assert 0 < measured <= sum(later), (measured, later)


def apply_every_second(database, tmp_path):
    jobs = {
        "jobs": [
            {"name": "each-second", "schedule": "@every 1s", "command": "true", "labels": ["linux"]}
        ]
    }
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(jobs))
    manage(database, "apply", str(tmp_path / "jobs.yaml"))


def catch_up(runner, timeout=30):
    """Take assignments until one reaches the runner within 0.3 s of its
    instant; their delays."""
    delays = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (not delays or delays[-1] > 0.3):
        delays += take(runner, 1)
    return delays


def take(runner, count, timeout=30):
    """Run `count` assignments (finish them at once); their delays as the
    runner saw them, from the instant to the answer in its hands."""
    delays = []
    deadline = time.monotonic() + timeout
    while len(delays) < count and time.monotonic() < deadline:
        for assignment in runner.claim(wait=5):
            delays.append(time.time() - scheduled_epoch(assignment))
            runner.finish(assignment["id"], assignment["lease"])
    return delays


def latency_histogram(url):
    """(count, sum) of croniq_dispatch_latency_seconds on /metrics."""
    text = requests.get(url + "/metrics", timeout=10).text
    values = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    prefix = "croniq_dispatch_latency_seconds"
    return values.get(f"{prefix}_count", 0), values.get(f"{prefix}_sum", 0)


def wait_for_latency_samples(url, count, timeout=10):
    """The histogram once `count` samples are written (they are written in
    batches shortly after their answers leave)."""
    deadline = time.monotonic() + timeout
    while True:
        found = latency_histogram(url)
        if found[0] >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)
