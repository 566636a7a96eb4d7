"""The runner API in-process: authentication, validation and every 4xx path."""

import datetime as dt

import pytest
from django.conf import settings
from django.utils import timezone

from audit.models import AuditEvent
from dispatch import hub
from runners.models import Runner, RunnerToken
from scheduler.models import Execution, LogChunk
from tests.runners.conftest import pending

REGISTER = "/v1/runners/register"


@pytest.fixture
def registered(api_client):
    answer = api_client.post(REGISTER, {"name": "r1", "labels": ["linux"], "session": "s1"})
    assert answer.status_code == 200, answer.content
    return answer.json()["runner_id"]


def assert_error(answer, status):
    assert answer.status_code == status, answer.content
    body = answer.json()
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_register_answers_the_contract(api_client, settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 7.0
    settings.CRONIQ_LEASE_TTL = 21.0
    body = {"name": "r1", "labels": ["a"], "session": "s1", "version": "1", "hostname": "h"}
    answer = api_client.post(REGISTER, body)
    assert answer.status_code == 200
    assert answer.json() == {
        "runner_id": Runner.objects.get(name="r1").pk,
        "session": "s1",
        "takeover": False,
        "heartbeat_interval": 7.0,
        "lease_ttl": 21.0,
        "features": ["finish-many"],
    }


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer ", "Basic abc", "Bearer crq_unknown", "Bearer nonsense"],
)
def test_calls_without_a_valid_token_get_401(api_client, authorization):
    body = {"name": "r1", "session": "s1"}
    if authorization is None:
        answer = api_client.post(REGISTER, body, secret=False)
    else:
        answer = api_client.post(REGISTER, body, authorization=authorization)
    assert_error(answer, 401)
    assert not Runner.objects.exists()


def test_a_revoked_token_gets_401(api_client, token):
    RunnerToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    assert_error(api_client.post(REGISTER, {"name": "r1", "session": "s1"}), 401)


def test_a_bound_name_refuses_another_token_with_403(api_client, registered):
    _, other = RunnerToken.issue("other")
    answer = api_client.post(REGISTER, {"name": "r1", "session": "s2"}, secret=other)
    assert_error(answer, 403)


@pytest.mark.parametrize(
    "body",
    [
        {"session": "s1"},
        {"name": "r1"},
        {"name": "", "session": "s1"},
        {"name": "x" * 201, "session": "s1"},
        {"name": "r\x001", "session": "s1"},
        {"name": "r1", "session": "s" * 65},
        {"name": "r1", "session": "\ud800"},
        {"name": "r1", "session": "s1", "labels": "linux"},
        {"name": "r1", "session": "s1", "labels": [1]},
        {"name": "r1", "session": "s1", "labels": [""]},
        {"name": "r1", "session": "s1", "capacity": 0},
        {"name": "r1", "session": "s1", "capacity": "2"},
        {"name": "r1", "session": "s1", "capacity": 1.5},
        {"name": 5, "session": "s1"},
        {"name": "r1", "session": "s1", "version": "v" * 51},
    ],
)
def test_an_invalid_register_body_is_422_and_changes_nothing(api_client, body):
    body = assert_error(api_client.post(REGISTER, body), 422)
    assert body["errors"]
    assert not Runner.objects.exists()


@pytest.mark.parametrize("raw", [b'{"name": ', b"[]", b'"x"', b"null", b"", b"\xff\xfe"])
def test_a_body_that_is_not_a_json_object_is_422(api_client, raw):
    assert_error(api_client.post(REGISTER, raw=raw), 422)


@pytest.mark.parametrize(
    "body",
    [
        {"session": "s1", "wait": 61},
        {"session": "s1", "wait": -0.5},
        {"session": "s1", "wait": "10"},
        {"session": "s1", "capacity": -1},
        {"session": "s1", "capacity": 10_000},
        {"session": "s1", "slots": 0},
        {"session": "s1", "slots": 10_000},
        {"session": "s1", "slots": "4"},
        {"wait": 1},
    ],
)
def test_an_invalid_poll_is_422(api_client, registered, body):
    assert_error(api_client.post(f"/v1/runners/{registered}/poll", body), 422)


def test_a_poll_with_nan_wait_is_422(api_client, registered):
    raw = b'{"session": "s1", "wait": NaN}'
    assert_error(api_client.post(f"/v1/runners/{registered}/poll", raw=raw), 422)


@pytest.mark.parametrize("runner_id", ["424242", "0", "-1", str(2**64)])
def test_calls_for_an_unknown_runner_are_404(api_client, registered, runner_id):
    for call, body in [
        ("poll", {"session": "s1"}),
        ("heartbeat", {"session": "s1"}),
        ("hand-back", {"session": "s1", "executions": []}),
    ]:
        assert_error(api_client.post(f"/v1/runners/{runner_id}/{call}", body), 404)


def test_a_superseded_session_gets_409_on_poll_and_heartbeat(api_client, registered):
    api_client.post(REGISTER, {"name": "r1", "session": "s2"})
    assert_error(api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1"}), 409)
    assert_error(api_client.post(f"/v1/runners/{registered}/heartbeat", {"session": "s1"}), 409)


def test_a_poll_hands_out_work_with_a_lease(api_client, registered):
    execution = pending(now=timezone.now(), labels=["linux"])
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1", "capacity": 2})
    assert answer.status_code == 200
    [assigned] = answer.json()["executions"]
    assert assigned["id"] == execution.pk
    assert assigned["lease"] == 1
    assert set(assigned) == {
        "id",
        "job",
        "command",
        "env",
        "timeout",
        "scheduled_for",
        "attempt",
        "lease",
        "lease_expires_at",
        "starts_in",  # 0: the answer left at the instant
        "trigger",  # how the run came about: the agent's CRONIQ_TRIGGER
        "traceparent",  # the run's trace context: the job's TRACEPARENT
        "max_output",  # the bytes its log keeps (docs/design.md §15)
    }
    assert assigned["traceparent"] == execution.traceparent


def test_work_stored_before_trace_contexts_is_handed_out_without_one(api_client, registered):
    execution = pending(now=timezone.now(), labels=["linux"], traceparent="")
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1", "capacity": 2})
    [assigned] = answer.json()["executions"]
    assert assigned["id"] == execution.pk
    assert "traceparent" not in assigned  # as an older server's assignment
    assert assigned["starts_in"] == 0
    assert assigned["trigger"] == "schedule"
    assert assigned["max_output"] == settings.CRONIQ_LOG_LIMIT


def test_an_early_poll_gets_work_ahead_of_its_instant_with_starts_in(
    api_client, registered, monkeypatch
):
    # The hub claims 5 s ahead here, not 0.15 s: a machine slow enough to
    # answer only after a 0.14 s instant looked like an answer held for it.
    monkeypatch.setattr(hub, "CLAIM_AHEAD", 5.0)
    instant = timezone.now() + dt.timedelta(seconds=3)  # within the hub's claim-ahead
    execution = pending(now=instant, labels=["linux"])
    body = {"session": "s1", "wait": 4, "early": True}
    answer = api_client.post(f"/v1/runners/{registered}/poll", body)
    arrived = timezone.now()
    [assigned] = answer.json()["executions"]
    assert assigned["id"] == execution.pk
    # The answer did not wait for the instant, and says how long the run must wait.
    assert arrived < instant
    assert 0 < assigned["starts_in"] <= 3
    assert arrived + dt.timedelta(seconds=assigned["starts_in"]) >= instant - dt.timedelta(
        milliseconds=5
    )
    # The instant itself, for a runner whose clock agrees to start at.
    assert dt.datetime.fromisoformat(assigned["starts_at"]) == instant


def test_a_poll_without_early_is_answered_at_the_instant(api_client, registered):
    instant = timezone.now() + dt.timedelta(seconds=0.08)
    pending(now=instant, labels=["linux"])
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1", "wait": 2})
    assert timezone.now() >= instant
    assert answer.json()["executions"][0]["starts_in"] == 0
    assert "starts_at" not in answer.json()["executions"][0]  # as before `early`


@pytest.mark.parametrize(("slots", "gets"), [(None, 1), (3, 3)])
def test_a_waiting_poll_that_says_its_slots_takes_those_its_runs_freed(
    api_client, registered, slots, gets
):
    # It polled with one slot free of three; both of its runs have ended since.
    # The poll must arrive before the instant (half a second holds on a
    # loaded machine; a tenth did not): work due on arrival goes by capacity.
    instant = timezone.now() + dt.timedelta(seconds=0.5)
    work = [pending(now=instant, labels=["linux"]) for _ in range(4)]
    body = {"session": "s1", "wait": 2, "capacity": 1, "early": True}
    if slots is not None:
        body["slots"] = slots
    answer = api_client.post(f"/v1/runners/{registered}/poll", body)
    assert [a["id"] for a in answer.json()["executions"]] == [e.pk for e in work[:gets]]


def test_a_poll_with_no_slot_free_yet_waits_for_one_its_runs_free(api_client, registered):
    # Its runner's runs all ended while the poll was on its way.
    instant = timezone.now() + dt.timedelta(seconds=0.5)
    work = [pending(now=instant, labels=["linux"]) for _ in range(3)]
    body = {"session": "s1", "wait": 2, "capacity": 0, "slots": 2, "early": True}
    answer = api_client.post(f"/v1/runners/{registered}/poll", body)
    assert [a["id"] for a in answer.json()["executions"]] == [e.pk for e in work[:2]]


def test_a_poll_with_no_room_and_no_slots_gets_nothing_however_long_it_waits(
    api_client, registered
):
    pending(now=timezone.now(), labels=["linux"])
    body = {"session": "s1", "wait": 0.3, "capacity": 0}
    assert api_client.post(f"/v1/runners/{registered}/poll", body).json() == {"executions": []}


def test_early_must_be_a_boolean(api_client, registered):
    body = {"session": "s1", "early": "yes"}
    assert_error(api_client.post(f"/v1/runners/{registered}/poll", body), 422)


def test_a_poll_with_nothing_to_do_and_no_wait_answers_an_empty_list(api_client, registered):
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1", "wait": 0})
    assert answer.json() == {"executions": []}


@pytest.fixture
def held(api_client, registered):
    pending(now=timezone.now(), labels=["linux"])
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1"})
    return answer.json()["executions"][0]


@pytest.mark.parametrize(
    "body",
    [
        {"session": "s1", "lease": 1, "seq": -1, "data": "x"},
        {"session": "s1", "lease": 1, "seq": 2**31, "data": "x"},
        {"session": "s1", "lease": 1, "seq": "0", "data": "x"},
        {"session": "s1", "lease": 1, "seq": 0, "data": 5},
        {"session": "s1", "lease": -1, "seq": 0, "data": "x"},
        {"session": "s1", "lease": 1, "seq": 0},
    ],
)
def test_an_invalid_log_call_is_422(api_client, held, body):
    assert_error(api_client.post(f"/v1/executions/{held['id']}/logs", body), 422)
    assert not LogChunk.objects.exists()


def test_a_log_chunk_above_64_kib_is_413(api_client, held):
    body = {"session": "s1", "lease": held["lease"], "seq": 0, "data": "x" * (64 * 1024 + 1)}
    assert_error(api_client.post(f"/v1/executions/{held['id']}/logs", body), 413)


def test_logs_and_finish_under_a_stale_lease_are_409(api_client, held):
    stale = held["lease"] + 1
    logs = {"session": "s1", "lease": stale, "seq": 0, "data": "x"}
    assert_error(api_client.post(f"/v1/executions/{held['id']}/logs", logs), 409)
    finish = {"session": "s1", "lease": stale, "exit_code": 0}
    assert_error(api_client.post(f"/v1/executions/{held['id']}/finish", finish), 409)
    assert Execution.objects.get(pk=held["id"]).state == Execution.RUNNING


@pytest.mark.parametrize("execution_id", ["424242", "0", str(2**70)])
def test_logs_and_finish_for_an_unknown_execution_are_404(api_client, held, execution_id):
    logs = {"session": "s1", "lease": 1, "seq": 0, "data": "x"}
    assert_error(api_client.post(f"/v1/executions/{execution_id}/logs", logs), 404)
    finish = {"session": "s1", "lease": 1, "exit_code": 0}
    assert_error(api_client.post(f"/v1/executions/{execution_id}/finish", finish), 404)


@pytest.mark.parametrize(
    "body",
    [
        {"session": "s1", "lease": 1, "exit_code": "0"},
        {"session": "s1", "lease": 1, "exit_code": 1.5},
        {"session": "s1", "lease": 1, "exit_code": 2**31},
        {"session": "s1", "lease": 1, "exit_code": 0, "timed_out": "yes"},
        {"session": "s1", "lease": 1, "exit_code": 0, "error": 3},
        {"session": "s1", "exit_code": 0},
    ],
)
def test_an_invalid_finish_is_422(api_client, held, body):
    assert_error(api_client.post(f"/v1/executions/{held['id']}/finish", body), 422)
    assert Execution.objects.get(pk=held["id"]).state == Execution.RUNNING


def test_finish_answers_the_final_state(api_client, held):
    body = {"session": "s1", "lease": held["lease"], "exit_code": 0}
    answer = api_client.post(f"/v1/executions/{held['id']}/finish", body)
    assert answer.status_code == 200
    assert answer.json() == {"state": "succeeded"}


def test_heartbeat_answers_renewed_lost_and_cancel(api_client, registered, held):
    body = {"session": "s1", "executions": [{"id": held["id"], "lease": held["lease"]}]}
    answer = api_client.post(f"/v1/runners/{registered}/heartbeat", body)
    assert answer.status_code == 200
    payload = answer.json()
    assert payload["renewed"] == [held["id"]]
    assert payload["lost"] == [] and payload["cancel"] == []
    assert payload["lease_expires_at"]


@pytest.mark.parametrize(
    "executions",
    [[{"id": "a", "lease": 1}], [{"id": 1}], "all", [{"id": 1, "lease": 1}] * 1001],
)
def test_an_invalid_heartbeat_is_422(api_client, registered, executions):
    body = {"session": "s1", "executions": executions}
    assert_error(api_client.post(f"/v1/runners/{registered}/heartbeat", body), 422)


def test_hand_back_returns_unstarted_work_to_pending(api_client, registered, held):
    stale = {"id": held["id"], "lease": held["lease"] + 1}
    body = {"session": "s1", "executions": [stale, {"id": 424242, "lease": 1}]}
    answer = api_client.post(f"/v1/runners/{registered}/hand-back", body)
    assert answer.json() == {"handed_back": []}  # not held under that lease: left alone
    assert Execution.objects.get(pk=held["id"]).state == Execution.RUNNING

    body = {"session": "s1", "executions": [{"id": held["id"], "lease": held["lease"]}]}
    answer = api_client.post(f"/v1/runners/{registered}/hand-back", body)
    assert answer.status_code == 200
    assert answer.json() == {"handed_back": [held["id"]]}
    execution = Execution.objects.get(pk=held["id"])
    assert (execution.state, execution.runner, execution.attempt) == (Execution.PENDING, None, 1)


def test_a_superseded_session_cannot_hand_back(api_client, registered, held):
    api_client.post(REGISTER, {"name": "r1", "labels": ["linux"], "session": "s2"})
    body = {"session": "s1", "executions": [{"id": held["id"], "lease": held["lease"]}]}
    assert_error(api_client.post(f"/v1/runners/{registered}/hand-back", body), 409)
    # The takeover released it as lost; the old session changed nothing more.
    assert Execution.objects.get(pk=held["id"]).state == Execution.LOST


@pytest.mark.parametrize(
    "body",
    [
        {"session": "s1"},
        {"session": "s1", "executions": [{"id": "a", "lease": 1}]},
        {"session": "s1", "executions": [{"id": 1, "lease": 1}] * 1001},
        {"executions": []},
    ],
)
def test_an_invalid_hand_back_is_422(api_client, registered, body):
    assert_error(api_client.post(f"/v1/runners/{registered}/hand-back", body), 422)


# -- finish, several at once ------------------------------------------------


@pytest.fixture
def two_held(api_client, registered):
    for _ in range(2):
        pending(now=timezone.now(), labels=["linux"])
    answer = api_client.post(f"/v1/runners/{registered}/poll", {"session": "s1", "capacity": 2})
    return answer.json()["executions"]


def test_finish_many_answers_each_report_as_its_own_finish_would(api_client, registered, two_held):
    first, second = two_held
    body = {
        "session": "s1",
        "executions": [
            {"id": first["id"], "lease": first["lease"], "exit_code": 0},
            {"id": second["id"], "lease": second["lease"], "exit_code": 3, "error": "disk full"},
            {"id": second["id"], "lease": second["lease"] + 1, "exit_code": 3},
            {"id": 424242, "lease": 1, "exit_code": 0},
        ],
    }
    answer = api_client.post(f"/v1/runners/{registered}/finish", body)
    assert answer.status_code == 200, answer.content
    reports = answer.json()["executions"]
    assert [(r["id"], r["status"], r["state"]) for r in reports] == [
        (first["id"], 200, "succeeded"),
        (second["id"], 200, "failed"),
        (second["id"], 409, None),
        (424242, 404, None),
    ]
    assert "not held under lease" in reports[2]["detail"]
    assert reports[0]["detail"] is None
    succeeded, failed = (Execution.objects.get(pk=e["id"]) for e in two_held)
    assert (succeeded.state, succeeded.exit_code) == (Execution.SUCCEEDED, 0)
    assert (failed.state, failed.exit_code, failed.error) == (Execution.FAILED, 3, "disk full")
    # The stale report was refused and audited as a single finish's would be.
    assert AuditEvent.objects.filter(action="execution.fencing_rejected").count() == 1

    again = api_client.post(
        f"/v1/runners/{registered}/finish", {**body, "executions": body["executions"][:2]}
    )
    assert [r["state"] for r in again.json()["executions"]] == ["succeeded", "failed"]


def test_finish_many_under_a_superseded_session_is_answered_per_execution(
    api_client, registered, two_held
):
    first, _ = two_held
    report = {"id": first["id"], "lease": first["lease"], "exit_code": 0}
    api_client.post(f"/v1/executions/{first['id']}/finish", {"session": "s1", **report})
    api_client.post(REGISTER, {"name": "r1", "labels": ["linux"], "session": "s2"})
    answer = api_client.post(
        f"/v1/runners/{registered}/finish", {"session": "s1", "executions": [report]}
    )
    # A retried report of a finish the server took before the takeover is
    # still answered its state, as the single finish answers it.
    assert answer.json()["executions"][0]["state"] == "succeeded"


def test_finish_many_refuses_the_call_for_the_caller_and_changes_nothing(
    api_client, registered, two_held
):
    first, _ = two_held
    report = {"id": first["id"], "lease": first["lease"], "exit_code": 0}
    body = {"session": "s1", "executions": [report]}
    assert_error(api_client.post(f"/v1/runners/{registered}/finish", body, secret="crq_x"), 401)
    assert_error(api_client.post("/v1/runners/424242/finish", body), 404)
    other = RunnerToken.issue("other")[1]
    api_client.post(REGISTER, {"name": "r2", "session": "t1"}, secret=other)
    r2 = Runner.objects.get(name="r2").pk
    assert_error(api_client.post(f"/v1/runners/{r2}/finish", body), 403)
    assert Execution.objects.get(pk=first["id"]).state == Execution.RUNNING


@pytest.mark.parametrize(
    "executions",
    [
        [],
        [{"id": 1, "lease": 1, "exit_code": "0"}],
        [{"id": 1, "exit_code": 0}],
        [{"id": 1, "lease": 1, "exit_code": 0, "timed_out": "yes"}],
        [{"id": 1, "lease": 1, "exit_code": 0}] * 1001,
        "all",
    ],
)
def test_an_invalid_finish_many_is_422_and_changes_nothing(
    api_client, registered, two_held, executions
):
    first, _ = two_held
    valid = {"id": first["id"], "lease": first["lease"], "exit_code": 0}
    if isinstance(executions, list) and executions and len(executions) < 1001:
        executions = [valid, *executions]
    body = {"session": "s1", "executions": executions}
    assert_error(api_client.post(f"/v1/runners/{registered}/finish", body), 422)
    assert Execution.objects.get(pk=first["id"]).state == Execution.RUNNING
