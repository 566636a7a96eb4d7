"""Chain edges written at the same time by two writers, each with its own
connection, never store a cycle: each writer checks its edges under the
chain graph's lock, so the later one sees the earlier one's edges
(PostgreSQL; SQLite's write transactions already take turns)."""

import datetime as dt
import threading

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from control.models import ApiKey
from scheduler.apply import document as applyfile
from scheduler.jobs import chain_graph
from scheduler.models import Job
from tests.admin_forms import job_form

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
TRIES = 30


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip("two writers at once need PostgreSQL; SQLite serialises write transactions")


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def job_item(name, **fields):
    return {"name": name, "schedule": "0 3 * * *", "command": "true", **fields}


def stored_cycle():
    """A cycle through the chains as stored, or None."""
    graph = {n: (s, f) for n, s, f in Job.objects.values_list("name", *chain_graph.FIELDS)}
    for name in graph:
        cycle = chain_graph.find_cycle(graph, name)
        if cycle:
            return cycle
    return None


def race(*writers):
    """Run the writers at once, each on its own thread and connection."""
    barrier = threading.Barrier(len(writers))
    errors = []

    def run(write):
        try:
            barrier.wait()
            write()
        except Exception as e:  # surfaced below: a refused write answers, it never raises
            errors.append(e)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=[write]) for write in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def api_patch(secret, name, target):
    def write():
        answer = Client().patch(
            f"/api/v1/jobs/{name}",
            {"on_success": [target]},
            content_type="application/json",
            headers={"authorization": f"Bearer {secret}"},
        )
        assert answer.status_code in (200, 422), answer.content

    return write


def admin_save(staff, name, target):
    job = Job.objects.get(name=name)
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    form = job_form(name=name, schedule="0 3 * * *", command="true", timezone="UTC")

    def write():
        answer = staff.post(url, {**form, "on_success": target})
        assert answer.status_code in (200, 302), answer.content[:2000]  # 200: refused

    return write


def apply_document(name, target):
    def write():
        try:
            applyfile.apply({"jobs": [job_item(name, on_success=[target])]}, now=NOW)
        except applyfile.ApplyError as e:
            assert "cycle" in " ".join(e.errors), e.errors

    return write


def test_two_api_patches_closing_a_cycle_never_both_store(postgres_only):
    _, secret = ApiKey.issue("deploy", ["jobs:read", "jobs:write"])
    applyfile.apply({"jobs": [job_item("a"), job_item("b")]}, now=NOW)
    Job.objects.update(managed_by="api")  # the API writes them without adopting
    for _ in range(TRIES):
        race(api_patch(secret, "a", "b"), api_patch(secret, "b", "a"))
        assert stored_cycle() is None
        chained = Job.objects.exclude(on_success=[]).count()
        assert chained == 1  # one writer won, the other was refused naming the cycle
        Job.objects.update(on_success=[])


def test_two_applies_closing_a_cycle_never_both_store(postgres_only):
    applyfile.apply({"jobs": [job_item("a"), job_item("b")]}, now=NOW)
    for _ in range(TRIES):
        race(apply_document("a", "b"), apply_document("b", "a"))
        assert stored_cycle() is None
        assert Job.objects.exclude(on_success=[]).count() == 1
        Job.objects.update(on_success=[])


def test_an_admin_save_and_an_api_patch_closing_a_cycle_never_both_store(postgres_only):
    _, secret = ApiKey.issue("deploy", ["jobs:read", "jobs:write"])
    staff = Client()
    staff.force_login(get_user_model().objects.create_superuser("ops", "ops@example.com", "pw"))
    applyfile.apply({"jobs": [job_item("a"), job_item("b")]}, now=NOW)
    Job.objects.update(managed_by="api")
    for _ in range(TRIES):
        race(admin_save(staff, "a", "b"), api_patch(secret, "b", "a"))
        assert stored_cycle() is None
        assert Job.objects.exclude(on_success=[]).count() == 1
        Job.objects.update(on_success=[])
