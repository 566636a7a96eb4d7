"""Overlap policies and concurrency groups in the apply file and the
management API's job writes (docs/design.md §10)."""

import datetime as dt

import pytest

from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.models import ConcurrencyGroup, Job

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def apply(document, **kwargs):
    return applyfile.apply(document, now=NOW, **kwargs)


def job(name="report", **fields):
    return {"name": name, "schedule": "*/5 * * * *", "command": "true", **fields}


def test_groups_and_job_policies_are_applied_and_a_second_apply_changes_nothing():
    document = {
        "concurrency_groups": [{"name": "vendor-api", "max_concurrent": 3}],
        "jobs": [
            job(overlap="queue", max_concurrent=2, max_queue=5, concurrency_group="vendor-api"),
            job("legacy", singleton=True),
        ],
    }
    apply(document)
    report = Job.objects.get(name="report")
    assert (report.overlap, report.max_concurrent, report.max_queue) == ("queue", 2, 5)
    assert report.concurrency_group.max_concurrent == 3
    legacy = Job.objects.get(name="legacy")
    assert (legacy.overlap, legacy.singleton) == (Job.SKIP, True)
    again = apply(document)
    assert {c.action for c in again} == {"unchanged"}


@pytest.mark.parametrize(
    "item, error",
    [
        (job(max_concurrent=0, overlap="queue"), "jobs[0].max_concurrent: must be at least 1"),
        (job(concurrency_group="nope"), "jobs[0].concurrency_group: no concurrency group"),
        (job(overlap="replace", singleton=True), "jobs[0].overlap: replace cannot be combined"),
        (job(overlap="sometimes"), "jobs[0].overlap"),
    ],
)
def test_bad_policies_are_refused_naming_the_field_and_nothing_is_applied(item, error):
    document = {"concurrency_groups": [{"name": "g", "max_concurrent": 1}], "jobs": [item]}
    with pytest.raises(ApplyError) as refused:
        apply(document)
    assert any(error in e for e in refused.value.errors), refused.value.errors
    assert not ConcurrencyGroup.objects.exists() and not Job.objects.exists()


def test_a_group_budget_below_one_is_refused():
    with pytest.raises(ApplyError) as refused:
        apply({"concurrency_groups": [{"name": "g", "max_concurrent": 0}]})
    assert refused.value.errors == [
        "concurrency_groups[0].max_concurrent: must be at least 1, got 0"
    ]


def test_prune_removes_a_group_the_file_no_longer_lists_once_its_jobs_are_gone():
    apply(
        {
            "concurrency_groups": [{"name": "g", "max_concurrent": 1}],
            "jobs": [job(concurrency_group="g")],
        },
        managed_source="ops",
    )
    apply({}, prune=True, managed_source="ops")
    assert not ConcurrencyGroup.objects.exists() and not Job.objects.exists()
