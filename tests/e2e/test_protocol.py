"""The runner protocol end to end: a real uvicorn, a plain HTTP client (docs/design.md §4)."""

import functools
import http.client
import json
import select
import socket
import threading
import time

import pytest
import requests

from harness.processes import drop_database, migrated_database, on_postgres, wait_for
from harness.processes import query as db_query
from tests.agent.world import python
from tests.e2e.protocol_client import (
    RunnerClient,
    execution_row,
    query,
    seed,
    seed_timed,
    start_server,
    token,
)

pytestmark = pytest.mark.e2e


# One database and one server for the module: every test uses runner and
# job names of its own, so they do not see each other's work.
@pytest.fixture(scope="module")
def e2e_database(tmp_path_factory):
    url = migrated_database(tmp_path_factory.mktemp("protocol"))
    yield url
    drop_database(url)


@pytest.fixture(scope="module")
def server(e2e_database, tmp_path_factory):
    process = start_server(e2e_database, tmp_path_factory.mktemp("web") / "web.log")
    yield process
    process.stop()


@pytest.fixture(scope="module")
def secret(e2e_database):
    return token(e2e_database)


@pytest.fixture
def runner(server, secret):
    client = RunnerClient(server.url, secret, labels=["linux"])
    assert client.register().status_code == 200
    return client


def test_register_answers_the_contract_and_keeps_the_runner_id_per_name(server, secret):
    first = RunnerClient(server.url, secret, name="build-1", labels=["linux"])
    answer = first.register(version="1.0", hostname="build-1.example")
    assert answer.status_code == 200
    body = answer.json()
    contract = {"runner_id", "session", "takeover", "heartbeat_interval", "lease_ttl"}
    assert set(body) == contract | {"features"}  # the contract's, and the additions'
    assert body["features"] == ["finish-many"]
    assert body["session"] == first.session
    assert body["takeover"] is False
    assert body["heartbeat_interval"] == 10.0
    assert body["lease_ttl"] == 30.0

    again = first.register()
    assert again.json()["runner_id"] == body["runner_id"]
    assert again.json()["takeover"] is False

    restarted = RunnerClient(server.url, secret, name="build-1", labels=["linux"])
    answer = restarted.register()
    assert answer.json()["runner_id"] == body["runner_id"]
    assert answer.json()["takeover"] is True


def test_takeover_releases_the_old_sessions_work_and_fences_the_old_session(
    server, secret, e2e_database
):
    old = RunnerClient(server.url, secret, name="worker", labels=["linux"])
    old.register()
    [pk] = seed(e2e_database, {"job": "takeover-job", "labels": ["linux"]})
    [held] = old.claim()
    assert held["id"] == pk

    new = RunnerClient(server.url, secret, name="worker", labels=["linux"])
    assert new.register().json()["takeover"] is True

    row = execution_row(e2e_database, pk)
    assert row["state"] == "lost"
    assert row["lost_reason"] == "runner_superseded"

    for answer in (
        old.poll(),
        old.heartbeat([(pk, held["lease"])]),
        old.logs(pk, held["lease"], 0, "late output"),
        old.finish(pk, held["lease"], exit_code=0),
    ):
        assert answer.status_code == 409, answer.text
        assert "detail" in answer.json()

    after = execution_row(e2e_database, pk)
    assert after == row  # nothing changed
    # The released run is retried at once and the new session gets it.
    [retry] = new.claim()
    assert retry["job"] == "takeover-job"
    assert retry["attempt"] == 2

    facts = query(
        e2e_database,
        f"""
        from audit.models import AuditEvent, Counter
        result = dict(
            takeovers=AuditEvent.objects.filter(
                action="runner.takeover", target_repr="worker").count(),
            rejections=AuditEvent.objects.filter(
                action="execution.fencing_rejected",
                target_type="scheduler.execution",
                target_id="{pk}",
            ).count(),
            takeover_counter=Counter.objects.value_of(
                "croniq_runner_takeovers_total", "runner=worker"),
            fencing_counter=Counter.objects.value_of("croniq_fencing_rejections_total"),
        )
        """,
    )
    assert facts["takeovers"] == 1
    assert facts["rejections"] == 2
    assert facts["takeover_counter"] == 1
    assert facts["fencing_counter"] >= 2  # shared with the module's other tests


def test_a_second_token_cannot_take_over_a_name_it_did_not_register(server, secret, e2e_database):
    owner = RunnerClient(server.url, secret, name="payments-1")
    owner.register()
    intruder = RunnerClient(server.url, token(e2e_database), name="payments-1")
    answer = intruder.register()
    assert answer.status_code == 403
    assert "bound to another token" in answer.json()["detail"]
    # The owner's session is untouched.
    assert owner.poll().status_code == 200
    refused = query(
        e2e_database,
        """
        from audit.models import AuditEvent
        refused = AuditEvent.objects.filter(action="runner.binding_refused")
        result = refused.filter(target_repr="payments-1").count()
        """,
    )
    assert refused == 1


def test_a_waiting_poll_is_woken_by_an_execution_inserted_by_another_process(runner, e2e_database):
    answers = []
    poller = threading.Thread(target=lambda: answers.append((runner.poll(wait=20), time.time())))
    poller.start()
    time.sleep(0.5)  # the poll is now waiting
    seeded = seed_timed(e2e_database, {"job": "wake-me", "labels": ["linux"]})
    poller.join(10)
    [(answer, arrived)] = answers
    [assigned] = answer.json()["executions"]
    assert assigned["id"] == seeded["ids"][0]
    # How soon is bench/dispatch_latency.py's figure, and the hint that
    # wakes the hub is tests/runners/test_notify.py's and test_hub.py's:
    # here, the web process (the database's only one) listens for it.
    print(f"answered {arrived - seeded['committed_at']:.3f}s after the commit")
    if on_postgres():
        sessions = db_query(
            e2e_database,
            "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()",
        )
        assert ("croniq wakeups",) in sessions, sessions


def test_work_claimed_ahead_of_its_instant_reaches_the_runner_at_the_instant(runner, e2e_database):
    answers = []
    poller = threading.Thread(target=lambda: answers.append((runner.poll(wait=20), time.time())))
    poller.start()
    [pk] = seed(e2e_database, {"job": "claimed-ahead", "labels": ["linux"], "delay": 3})
    poller.join(15)
    [(answer, arrived)] = answers
    assert [e["id"] for e in answer.json()["executions"]] == [pk]
    run_after, claimed_at = query(
        e2e_database,
        f"""
        from scheduler.models import Execution
        e = Execution.objects.get(pk={pk})
        from django.conf import settings
        claimed = e.lease_expires_at.timestamp() - settings.CRONIQ_LEASE_TTL
        result = [e.run_after.timestamp(), claimed]
        """,
    )
    assert claimed_at < run_after  # the hub claimed it ahead of its instant...
    assert arrived >= run_after  # ...and the runner had it only at the instant


def test_a_poll_that_finds_nothing_answers_an_empty_list_when_wait_runs_out(runner):
    started = time.monotonic()
    assert runner.claim(wait=1) == []
    assert time.monotonic() - started > 0.9  # its wait, then the answer


def test_runners_only_receive_jobs_whose_labels_they_all_carry(server, secret, e2e_database):
    linux = RunnerClient(server.url, secret, labels=["linux"], capacity=10)
    gpu = RunnerClient(server.url, secret, labels=["linux", "gpu"], capacity=10)
    linux.register()
    gpu.register()
    gpu_job, any_job, linux_job = seed(
        e2e_database,
        {"job": "train", "labels": ["gpu", "linux"]},
        {"job": "anywhere", "labels": []},
        {"job": "linux-only", "labels": ["linux"]},
    )
    assert {e["id"] for e in linux.claim()} == {any_job, linux_job}
    assert [e["id"] for e in gpu.claim()] == [gpu_job]


def test_the_assignment_carries_the_job_and_a_fresh_lease(runner, e2e_database):
    [pk] = seed(
        e2e_database,
        {
            "job": "report",
            "labels": ["linux"],
            "command": "echo hi",
            "env": {"A": "1"},
            "timeout": 60,
        },
    )
    [assigned] = runner.claim()
    assert assigned["id"] == pk
    assert assigned["job"] == "report"
    assert assigned["command"] == "echo hi"
    assert assigned["env"] == {"A": "1"}
    assert assigned["timeout"] == 60
    assert assigned["attempt"] == 1
    assert assigned["lease"] == 1
    assert assigned["scheduled_for"].endswith("Z") or "+00:00" in assigned["scheduled_for"]
    row = execution_row(e2e_database, pk)
    assert row["state"] == "running"
    assert row["session"] == runner.session


def test_heartbeat_renews_held_leases_and_reports_lost_and_cancelled_ones(runner, e2e_database):
    first, second = seed(
        e2e_database,
        {"job": "hb-1", "labels": ["linux"]},
        {"job": "hb-2", "labels": ["linux"]},
    )
    held = {e["id"]: e for e in runner.claim(capacity=2)}
    before = execution_row(e2e_database, first)["lease_expires_at"]
    query(
        e2e_database,
        f"""
        from django.utils import timezone
        from scheduler.models import Execution
        Execution.objects.filter(pk={second}).update(cancel_requested_at=timezone.now())
        result = None
        """,
    )
    answer = runner.heartbeat(
        [(first, held[first]["lease"]), (second, held[second]["lease"]), (999999, 1)]
    )
    assert answer.status_code == 200
    body = answer.json()
    assert sorted(body["renewed"]) == sorted([first, second])
    assert body["lost"] == [999999]
    assert body["cancel"] == [second]
    assert execution_row(e2e_database, first)["lease_expires_at"] > before
    # A wrong lease is not renewed.
    stale = runner.heartbeat([(first, held[first]["lease"] + 1)]).json()
    assert stale["renewed"] == [] and stale["lost"] == [first]


def test_logs_are_appended_once_per_seq_and_refused_above_64_kib(runner, e2e_database):
    [pk] = seed(e2e_database, {"job": "chatty", "labels": ["linux"]})
    [held] = runner.claim()
    lease = held["lease"]
    assert runner.logs(pk, lease, 0, "hello\n").json() == {"ok": True}
    assert runner.logs(pk, lease, 0, "hello\n").json() == {"ok": True}  # a retry
    assert runner.logs(pk, lease, 1, "wörld\n").status_code == 200
    too_big = runner.logs(pk, lease, 2, "é" * (32 * 1024 + 1))  # 64 KiB + 2 bytes encoded
    assert too_big.status_code == 413
    assert "detail" in too_big.json()
    row = execution_row(e2e_database, pk)
    assert row["logs"] == [[0, "hello\n"], [1, "wörld\n"]]
    assert row["log_size"] == len("hello\nwörld\n".encode())


def test_the_log_cap_truncates_with_a_marker(e2e_database, tmp_path):
    server = start_server(e2e_database, tmp_path / "web.log", CRONIQ_LOG_LIMIT=1024)
    try:
        client = RunnerClient(server.url, token(e2e_database), labels=["linux"])
        client.register()
        [pk] = seed(e2e_database, {"job": "verbose", "labels": ["linux"]})
        [held] = client.claim()
        for seq in range(3):
            assert client.logs(pk, held["lease"], seq, "x" * 600).status_code == 200
        row = execution_row(e2e_database, pk)
        assert row["log_truncated"] is True
        assert row["log_size"] == 1024
        stored = "".join(data for _, data in row["logs"])
        assert stored.startswith("x" * 1024)
        assert "log truncated at 1024 bytes" in stored
        assert len(row["logs"]) == 2  # the third chunk is dropped
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("report", "state"),
    [
        ({"exit_code": 0}, "succeeded"),
        ({"exit_code": 3, "error": "boom"}, "failed"),
        ({"exit_code": None, "error": "killed"}, "failed"),
        ({"exit_code": None, "timed_out": True}, "timed_out"),
    ],
)
def test_finish_settles_the_execution(runner, e2e_database, report, state):
    [pk] = seed(e2e_database, {"job": "finisher", "labels": ["linux"]})
    [held] = runner.claim()
    answer = runner.finish(pk, held["lease"], **report)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"state": state}
    row = execution_row(e2e_database, pk)
    assert row["state"] == state
    assert row["exit_code"] == report["exit_code"]
    assert row["finished_at"] is not None
    # A retried finish (the answer was lost) gets the same answer, not 409.
    assert runner.finish(pk, held["lease"], **report).json() == {"state": state}


def test_a_failed_run_with_retries_comes_back_after_its_backoff(runner, e2e_database):
    [pk] = seed(e2e_database, {"job": "flaky", "labels": ["linux"], "retries": 1})
    [held] = runner.claim()
    runner.finish(pk, held["lease"], exit_code=1)
    retry = query(
        e2e_database,
        """
        from scheduler.models import Execution
        e = Execution.objects.get(job__name="flaky", attempt=2)
        result = dict(state=e.state, delay=(e.run_after - e.created_at).total_seconds())
        """,
    )
    assert retry == {"state": "pending", "delay": 30.0}
    assert runner.claim() == []  # not before its run_after


def test_after_a_reap_and_a_new_claim_the_old_lease_changes_nothing(server, secret, e2e_database):
    first = RunnerClient(server.url, secret, labels=["linux"])
    second = RunnerClient(server.url, secret, labels=["linux"])
    first.register()
    second.register()
    [pk] = seed(e2e_database, {"job": "reaped", "labels": ["linux"]})
    [held] = first.claim()
    # The reaper's path: the lease expired and the run is released for a retry.
    query(
        e2e_database,
        f"""
        from django.utils import timezone
        from scheduler.runs import lifecycle
        from scheduler.models import Execution
        held = Execution.objects.filter(pk={pk})
        lifecycle.release(held, lifecycle.LEASE_EXPIRED, timezone.now())
        from dispatch.notify import notify_new_work
        notify_new_work()
        result = None
        """,
    )
    [retry] = second.claim()
    before = execution_row(e2e_database, pk)
    assert first.logs(pk, held["lease"], 0, "zombie").status_code == 409
    assert first.finish(pk, held["lease"], exit_code=0).status_code == 409
    assert first.heartbeat([(pk, held["lease"])]).json()["lost"] == [pk]
    assert execution_row(e2e_database, pk) == before
    assert second.finish(retry["id"], retry["lease"], exit_code=0).json() == {"state": "succeeded"}


def test_every_error_is_json_with_the_contract_status(runner, server, e2e_database):
    url = server.url
    register = url + "/api/v1/runners/register"
    body = {"name": "x", "session": "s"}

    assert requests.post(register, json=body, timeout=5).status_code == 401
    wrong = {"Authorization": "Bearer crq_not-a-token"}
    assert requests.post(register, json=body, headers=wrong, timeout=5).status_code == 401

    revoked = token(e2e_database, "revoked-token")
    python(
        e2e_database,
        "from django.utils import timezone; from runners.models import RunnerToken; "
        "RunnerToken.objects.filter(name='revoked-token').update(revoked_at=timezone.now())",
    )
    assert RunnerClient(url, revoked).register().status_code == 401

    auth = {"Authorization": f"Bearer {runner.secret}"}
    cases = [
        ("/api/v1/runners/987654/poll", {"session": "s"}, 404),
        ("/api/v1/runners/987654/heartbeat", {"session": "s", "executions": []}, 404),
        ("/api/v1/executions/987654/logs", {"session": "s", "lease": 1, "seq": 0, "data": ""}, 404),
        ("/api/v1/executions/987654/finish", {"session": "s", "lease": 1, "exit_code": 0}, 404),
        (f"/api/v1/runners/{runner.runner_id}/poll", {"session": "other"}, 409),
        (f"/api/v1/runners/{runner.runner_id}/poll", {"session": runner.session, "wait": 61}, 422),
        (f"/api/v1/runners/{runner.runner_id}/poll", {"session": runner.session, "wait": -1}, 422),
        (f"/api/v1/runners/{runner.runner_id}/poll", {"session": runner.session, "wait": "x"}, 422),
        (f"/api/v1/runners/{runner.runner_id}/poll", {"wait": 1}, 422),
        ("/api/v1/runners/register", {"name": "", "session": "s"}, 422),
        ("/api/v1/runners/register", {"name": "n", "session": "s", "labels": "linux"}, 422),
        ("/api/v1/executions/1/finish", {"session": "s", "lease": 1, "exit_code": "0"}, 422),
        ("/api/v1/runners/not-a-number/poll", {"session": "s"}, 422),
    ]
    for path, payload, status in cases:
        answer = requests.post(url + path, json=payload, headers=auth, timeout=5)
        assert answer.status_code == status, (path, payload, answer.text)
        assert isinstance(answer.json()["detail"], str), answer.text

    # Above Django's request size limit (2.5 MB), before any parsing.
    huge = {"session": "s", "lease": 1, "seq": 0, "data": "x" * 3_000_000}
    answer = requests.post(url + "/api/v1/executions/1/logs", json=huge, headers=auth, timeout=30)
    assert answer.status_code == 413
    assert "detail" in answer.json()

    malformed = requests.post(
        register, data=b'{"name": ', headers={**auth, "Content-Type": "application/json"}, timeout=5
    )
    assert malformed.status_code == 422
    assert "detail" in malformed.json()


@pytest.mark.parametrize("host", ["", "evil.example", "a b"])
def test_a_refused_host_header_is_a_json_400_not_a_page_and_a_traceback(server, secret, host):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = json.dumps({"name": "host-check", "session": "s"}).encode()
    conn.putrequest("POST", "/api/v1/runners/register", skip_host=True)
    for name, value in [
        ("Host", host),
        ("Authorization", f"Bearer {secret}"),
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(body))),
    ]:
        conn.putheader(name, value)
    conn.endheaders(body)
    answer = conn.getresponse()
    assert answer.status == 400
    assert json.loads(answer.read()) == {"detail": "invalid Host header"}
    conn.close()
    assert "Traceback" not in server.output()


def test_a_long_poll_whose_runner_hung_up_claims_nothing(server, secret, e2e_database):
    gone = RunnerClient(server.url, secret, name="hangs-up", labels=["hangup"])
    gone.register()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(raw_poll(server, secret, gone, wait=30))
        time.sleep(1)  # the poll found nothing and waits in the hub
    time.sleep(0.5)  # the hang-up reached the server

    [pk] = seed(e2e_database, {"job": "after-hang-up", "labels": ["hangup"]})
    other = RunnerClient(server.url, secret, name="still-here", labels=["hangup"])
    other.register()
    [held] = other.claim(wait=10)
    assert held["id"] == pk


def test_work_held_for_its_instant_goes_back_when_its_runner_hangs_up_first(
    server, secret, e2e_database
):
    """The hub claims work CLAIM_AHEAD before its instant and holds the
    answer till then. A runner that hangs up in the hold never saw the work:
    it is pending again at once, the same attempt, not held until its lease
    runs out and retried as lost."""
    gone = RunnerClient(server.url, secret, name="hangs-up-in-hold", labels=["held"])
    gone.register()

    def state_is(pk, state):
        sql = "SELECT state FROM scheduler_execution WHERE id = %s"
        return db_query(e2e_database, sql, (pk,))[0][0] == state

    for _ in range(5):
        [pk] = seed(e2e_database, {"job": "held-then-hung-up", "labels": ["held"], "delay": 4})
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            sock.sendall(raw_poll(server, secret, gone, wait=10))
            wait_for(functools.partial(state_is, pk, "running"), timeout=10, interval=0.002)
            answered = select.select([sock], [], [], 0)[0]
        if not answered:
            break  # hung up inside the hold
        # This machine was too slow to hang up inside the 100 ms hold: again.
        gone.finish(pk, execution_row(e2e_database, pk)["lease"])
    else:
        pytest.fail("never hung up inside the hold")

    wait_for(functools.partial(state_is, pk, "pending"), timeout=5)
    row = execution_row(e2e_database, pk)
    assert (row["runner"], row["lease_expires_at"]) == (None, None)
    other = RunnerClient(server.url, secret, name="takes-it-over", labels=["held"])
    other.register()
    [held] = other.claim(wait=10)
    assert (held["id"], held["attempt"]) == (pk, 1)
    handed_back = "SELECT COUNT(*) FROM audit_auditevent WHERE action = %s AND target_id = %s"
    assert db_query(e2e_database, handed_back, ("execution.handed_back", str(pk)))[0][0] == 1


def raw_poll(server, secret, runner, wait):
    """A poll request's bytes, for a client that hangs up before its answer."""
    body = json.dumps({"session": runner.session, "wait": wait, "capacity": 1}).encode()
    return (
        f"POST /api/v1/runners/{runner.runner_id}/poll HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {secret}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
