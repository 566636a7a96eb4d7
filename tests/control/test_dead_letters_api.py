"""`/api/v1/dead-letters`: the list in cursor pages, replay (202 with the new
execution; 409 `stale replay` without force) and discard, one (DELETE) or
many, audited with the key's name."""

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEvent
from scheduler.models import Execution
from scheduler.triage.dead_letters import DeadLetter
from tests.control.keyed_client import KeyedClient
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 30, tzinfo=dt.UTC)
SOON = T0 + dt.timedelta(hours=1)


@pytest.fixture
def api(client):
    return KeyedClient(client, ["dead-letters:read", "dead-letters:write"], name="ops-bot")


def dead_letter(job_name="billing-sync", scheduled_for=T0, attempt=1, **fields):
    job = JobFactory(name=job_name)
    execution = ExecutionFactory(
        job=job, scheduled_for=scheduled_for, attempt=attempt, state=Execution.FAILED,
        exit_code=2, finished_at=scheduled_for,
    )  # fmt: skip
    return DeadLetter.objects.create(
        execution=execution, reason="failed", detail="exit code 2", log_tail="oops",
        landed_at=scheduled_for, **fields,
    )  # fmt: skip


def test_the_list_shows_open_dead_letters_newest_first_in_cursor_pages(api):
    first, second = dead_letter("a"), dead_letter("b")
    dead_letter("c", discarded_at=T0)
    page = api.get("dead-letters", limit=1).json()
    assert [item["id"] for item in page["items"]] == [second.pk]
    assert page["items"][0] | {"landed_at": None, "scheduled_for": None} == {
        "id": second.pk, "execution": second.execution_id, "job": "b", "project": "default",
        "scheduled_for": None, "attempt": 1, "reason": "failed", "detail": "exit code 2",
        "log_tail": "oops", "landed_at": None, "status": "open", "replayed_at": None,
        "replayed_execution": None, "discarded_at": None,
    }  # fmt: skip
    rest = api.get("dead-letters", limit=1, cursor=page["next_cursor"]).json()
    assert ([item["id"] for item in rest["items"]], rest["next_cursor"]) == ([first.pk], None)


def test_the_list_filters_by_status_and_job_and_refuses_an_unknown_status(api):
    dead_letter("a")
    discarded = dead_letter("b", discarded_at=T0)
    answer = api.get("dead-letters", status="discarded").json()
    assert [item["id"] for item in answer["items"]] == [discarded.pk]
    assert len(api.get("dead-letters", status="all").json()["items"]) == 2
    assert api.get("dead-letters", job="b").json()["items"] == []
    refused = api.get("dead-letters", status="sleeping")
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("status: one of open")


def test_a_replay_answers_202_with_the_new_attempt_of_the_same_instant(api):
    letter = dead_letter()
    with time_machine.travel(SOON, tick=False):
        answer = api.post(f"dead-letters/{letter.pk}/replay", {"force": False})
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["job"], body["attempt"], body["trigger"]) == ("billing-sync", 2, "replay")
    assert dt.datetime.fromisoformat(body["scheduled_for"]) == T0
    event = AuditEvent.objects.get(action="deadletter.replay")
    assert (event.actor_kind, event.actor_name) == ("api_key", "ops-bot")
    again = api.post(f"dead-letters/{letter.pk}/replay")
    assert again.status_code == 409
    assert Execution.objects.filter(trigger=Execution.REPLAY).count() == 1


def test_a_stale_replay_is_409_naming_force_and_force_runs_it(api):
    letter = dead_letter()
    with time_machine.travel(T0 + dt.timedelta(days=8), tick=False):
        refused = api.post(f"dead-letters/{letter.pk}/replay")
        assert refused.status_code == 409
        assert refused.json()["detail"].startswith("stale replay")
        assert "force" in refused.json()["detail"]
        assert Execution.objects.count() == 1
        forced = api.post(f"dead-letters/{letter.pk}/replay", {"force": True})
    assert forced.status_code == 202, forced.content


def test_delete_discards_one_then_answers_409(api):
    letter = dead_letter()
    assert api.delete(f"dead-letters/{letter.pk}").status_code == 204
    letter.refresh_from_db()
    assert letter.status == DeadLetter.DISCARDED
    again = api.delete(f"dead-letters/{letter.pk}")
    assert (again.status_code, again.json()) == (
        409,
        {"detail": f"dead letter {letter.pk} was discarded already"},
    )
    assert api.delete("dead-letters/999999").status_code == 404
    assert AuditEvent.objects.filter(action="deadletter.discard").count() == 1


def test_bulk_discard_closes_the_open_ones_named(api):
    letters = [dead_letter(name) for name in ("a", "b", "c")]
    done = dead_letter("d", discarded_at=T0)
    answer = api.post("dead-letters/discard", {"ids": [letters[0].pk, letters[1].pk, done.pk]})
    assert (answer.status_code, answer.json()) == (200, {"discarded": 2})
    statuses = [DeadLetter.objects.get(pk=each.pk).status for each in letters]
    assert statuses == ["discarded", "discarded", "open"]


@pytest.mark.parametrize("body", [{}, {"ids": []}, {"ids": ["x"]}, {"ids": [2**64]}])
def test_bulk_discard_refuses_bad_input_and_changes_nothing(api, body):
    letter = dead_letter()
    assert api.post("dead-letters/discard", body).status_code == 422
    letter.refresh_from_db()
    assert letter.status == DeadLetter.OPEN


def test_a_key_without_the_write_scope_may_list_but_not_replay(client):
    reader = KeyedClient(client, ["dead-letters:read"], name="reader")
    letter = dead_letter()
    assert reader.get("dead-letters").status_code == 200
    answer = reader.post(f"dead-letters/{letter.pk}/replay")
    assert answer.status_code == 403
    assert answer.json() == {"detail": "needs scope dead-letters:write"}
