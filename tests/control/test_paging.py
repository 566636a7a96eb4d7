"""Cursor paging of the management API's lists (control.paging)."""

import pytest
from ninja.errors import HttpError

from control import paging
from scheduler.models import Job
from tests.factories import JobFactory


def names(rows):
    return [row.name for row in rows]


def test_pages_follow_each_other_without_repeats_or_gaps(db):
    for n in range(7):
        JobFactory(name=f"job-{n}")

    first, cursor = paging.page(Job.objects.all(), "name", limit=3)
    second, cursor2 = paging.page(Job.objects.all(), "name", limit=3, cursor=cursor)
    JobFactory(name="job-0a")  # added behind the cursor: no page shifts
    third, end = paging.page(Job.objects.all(), "name", limit=3, cursor=cursor2)

    assert names(first) == ["job-0", "job-1", "job-2"]
    assert names(second) == ["job-3", "job-4", "job-5"]
    assert (names(third), end) == (["job-6"], None)


def test_a_descending_page_by_id(db):
    ids = [JobFactory(name=f"job-{n}").pk for n in range(3)]
    rows, cursor = paging.page(Job.objects.all(), "pk", limit=2, descending=True)
    rest, end = paging.page(Job.objects.all(), "pk", limit=2, cursor=cursor, descending=True)
    assert [r.pk for r in rows + rest] == ids[::-1] and end is None


@pytest.mark.parametrize(
    "cursor",
    ["not-base64!", paging.encode([1, 2]), paging.encode(True), paging.encode(2**64),
     paging.encode("a\x00b")],
)  # fmt: skip
def test_a_foreign_cursor_is_refused(db, cursor):
    with pytest.raises(HttpError, match="cursor"):
        paging.page(Job.objects.all(), "name", cursor=cursor)


@pytest.mark.parametrize("limit", [0, 501])
def test_a_limit_outside_one_to_five_hundred_is_refused(db, limit):
    with pytest.raises(HttpError, match="limit"):
        paging.page(Job.objects.all(), "name", limit=limit)
