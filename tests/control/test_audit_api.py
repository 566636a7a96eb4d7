"""The audit trail over the management API: newest first, filtered, paged."""

from datetime import UTC, datetime, timedelta

import pytest

import audit
from control import paging
from tests.control.calls import call, key
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def reader():
    return key("auditor", ["audit:read"])[1]


@pytest.fixture
def trail():
    job = JobFactory(name="nightly")
    return [
        audit.record("job.paused", target=job, actor=("user", "ann"), at=NOW - timedelta(hours=3)),
        audit.record("job.resumed", target=job, actor=("user", "bob"), at=NOW - timedelta(hours=2)),
        audit.record("runner.drained", actor=("api_key", "ci"), at=NOW - timedelta(hours=1)),
        audit.record("jobsync.done", at=NOW, data={"n": 1}),
    ]


def ids(client, reader, query=""):
    answer = call(client, "get", f"/api/v1/audit{query}", reader)
    assert answer.status_code == 200, answer.content
    return [event["id"] for event in answer.json()["items"]]


def test_events_come_newest_first_with_every_field(client, reader, trail):
    answer = call(client, "get", "/api/v1/audit", reader).json()

    assert [e["id"] for e in answer["items"]] == [e.pk for e in reversed(trail)]
    assert answer["next_cursor"] is None
    assert answer["items"][-1] == {
        "id": trail[0].pk,
        "at": "2026-12-01T09:00:00Z",
        "actor_kind": "user",
        "actor_name": "ann",
        "action": "job.paused",
        "target_type": "scheduler.job",
        "target_id": str(trail[0].target_id),
        "target_repr": "nightly",
        "project": "default",
        "data": {},
    }


def test_pages_follow_each_other_newest_first(client, reader, trail):
    first = call(client, "get", "/api/v1/audit?limit=3", reader).json()
    rest = ids(client, reader, f"?limit=3&cursor={first['next_cursor']}")
    assert [e["id"] for e in first["items"]] + rest == [e.pk for e in reversed(trail)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("?action=job.", [1, 0]),  # a prefix: not jobsync.done
        ("?action=job.paused", [0]),
        ("?actor=bob", [1]),
        ("?target=nightly", [1, 0]),
        ("?since=2026-12-01T10:00:00%2B00:00", [3, 2, 1]),  # at or after
        ("?since=2026-12-01T11:00:00Z&action=runner.", [2]),
    ],
)
def test_filters(client, reader, trail, query, expected):
    assert ids(client, reader, query) == [trail[n].pk for n in expected]


def test_target_matches_an_id_too(client, reader, trail):
    assert ids(client, reader, f"?target={trail[0].target_id}") == [trail[1].pk, trail[0].pk]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?since=2026-12-01T10:00:00%2B99:00", "since"),
        ("?since=yesterday", "since"),
        ("?actor=a%00b", "actor"),
        ("?limit=0", "limit"),
        ("?cursor=bm90LWEtY3Vyc29y", "cursor"),
        (f"?cursor={paging.encode('12')}", "cursor"),  # a name's cursor, not an id's
    ],
)
def test_bad_filters_are_422_naming_the_field(client, reader, query, field):
    answer = call(client, "get", f"/api/v1/audit{query}", reader)
    assert answer.status_code == 422
    assert field in answer.json()["detail"].split(":")[0]


def test_an_offset_postgresql_cannot_store_is_the_same_instant_in_utc(client, reader, trail):
    # Python takes +16:00, PostgreSQL refuses offsets past 15:59: the call
    # reads the instant in UTC instead of answering 500.
    # 2026-12-01 10:30 UTC: the last two events are at or after it.
    since = "2026-12-02T02:30:00%2B16:00"
    assert ids(client, reader, f"?since={since}") == [trail[3].pk, trail[2].pk]
