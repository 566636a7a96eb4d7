"""Why a run has not started, as `croniq mcp`'s why_pending derives it from
the API's answers (croniq_runner.pending): the claim's rules, most lasting
hold first, and what the API cannot show named as uncertain."""

from datetime import UTC, datetime

import pytest

from croniq_runner.pending import why_pending

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
RUN = {
    "id": 7,
    "job": "train",
    "state": "pending",
    "attempt": 1,
    "scheduled_for": "2026-12-01T09:59:00Z",
    "pinned_to": "",
    "runner": None,
}
JOB = {"name": "train", "labels": ["gpu"], "retry_backoff": 30, "stdin": "", "run_as": ""}
NO_MAINTENANCE = {"active": False, "on": False, "reason": "", "windows": []}


def runner(name, labels=("gpu",), state="online", drained=False, capacity=1, running=0):
    return {
        "name": name,
        "labels": list(labels),
        "state": state,
        "drained": drained,
        "capacity": capacity,
        "running": running,
    }


def why(run=None, job=None, runners=(), maintenance=None, now=NOW):
    return why_pending(
        RUN | (run or {}), JOB | (job or {}), list(runners), maintenance or NO_MAINTENANCE, now
    )


def test_no_runner_with_the_jobs_labels_was_ever_seen():
    answer = why(runners=[runner("web-1", labels=["linux"])])

    assert (answer["kind"], answer["reason"]) == (
        "no_runner",
        "no runner with labels gpu has been seen; 1 runner online: linux",
    )
    assert answer["run"] == 7 and answer["state"] == "pending"
    assert "derived by croniq mcp" in answer["derived"]


def test_with_no_runner_at_all_it_says_none_is_online():
    assert why(job={"labels": []})["reason"] == (
        "no runner has registered yet; no runner is online"
    )


def test_the_runners_carrying_the_labels_are_offline_or_draining():
    answer = why(runners=[runner("gpu-1", state="offline"), runner("gpu-2", drained=True)])

    assert answer["kind"] == "unavailable"
    assert answer["reason"] == (
        "the runners with labels gpu are offline or draining: gpu-1 offline, gpu-2 draining"
    )


def test_busy_runners_are_told_with_their_slots():
    answer = why(runners=[runner("gpu-1", capacity=2, running=2), runner("gpu-2", running=1)])

    assert (answer["kind"], answer["reason"]) == (
        "busy",
        "the 2 runners with labels gpu are busy: 3 of 3 slots in use",
    )


def test_a_free_slot_means_it_starts_at_the_next_poll():
    answer = why(runners=[runner("gpu-1", capacity=2, running=1), runner("cpu", labels=[])])

    assert (answer["kind"], answer["also"], answer["uncertain"]) == ("free", [], [])
    assert answer["reason"] == (
        "the 1 runner with labels gpu has 1 free slot: it should start at a runner's next poll"
    )


def test_a_run_whose_instant_has_not_come_waits_for_it():
    answer = why(run={"scheduled_for": "2026-12-01T11:30:00+01:00"}, runners=[runner("gpu-1")])

    assert (answer["kind"], answer["reason"]) == (
        "not_yet",
        "it is scheduled for 2026-12-01 10:30:00 UTC, ahead",
    )


def window(active=True, labels=(), end="2026-12-01T12:00:00Z"):
    return {"active": active, "labels": list(labels), "reason": "", "end": end}


@pytest.mark.parametrize(
    ("maintenance", "held"),
    [
        ({"on": True, "reason": "upgrade"}, True),
        ({"windows": [window()]}, True),
        ({"windows": [window(labels=["gpu"])]}, True),
        ({"windows": [window(labels=["db"])]}, False),
        ({"windows": [window(active=False, end="2026-12-02T12:00:00Z")]}, False),
    ],
)
def test_maintenance_holds_the_jobs_it_covers(maintenance, held):
    answer = why(runners=[runner("gpu-1")], maintenance=NO_MAINTENANCE | maintenance)

    assert (answer["kind"] == "maintenance") == held


def test_maintenance_after_a_missing_runner_is_told_too():
    kernel = window() | {"reason": "kernel"}

    answer = why(maintenance=NO_MAINTENANCE | {"windows": [kernel]})

    assert answer["kind"] == "no_runner"
    assert answer["also"] == [
        "a maintenance window (kernel) holds it until 2026-12-01 12:00:00 UTC: runners claim "
        "nothing it covers meanwhile"
    ]


def test_a_pinned_run_waits_for_its_own_runner_only():
    runners = [runner("gpu-1"), runner("gpu-2", state="offline")]

    gone = why(run={"pinned_to": "gpu-3"}, runners=runners)
    offline = why(run={"pinned_to": "gpu-2"}, runners=runners)

    assert gone["reason"] == (
        "it is pinned to runner gpu-3 (run_on: all), which is no longer registered"
    )
    assert (offline["kind"], offline["reason"]) == (
        "unavailable",
        "the runners with labels gpu are offline or draining: gpu-2 offline",
    )


def test_what_the_api_does_not_show_is_named_as_uncertain():
    # A server older than the runners' `features` leaves them out.
    answer = why(
        run={"attempt": 3},
        job={"stdin": "data", "run_as": "etl", "concurrency_group": "warehouse"},
        runners=[runner("gpu-1")],
    )

    assert answer["kind"] == "free"
    assert [note.split(":")[0] for note in answer["uncertain"]] == [
        "attempt 3 is a retry",
        "the job needs stdin and run_as",
        "the job is in concurrency group warehouse",
    ]
    http = why(job={"kind": "http"}, runners=[runner("gpu-1")])
    assert [note.split(":")[0] for note in http["uncertain"]] == ["the job needs http"]
    container = why(job={"kind": "container"}, runners=[runner("gpu-1")])
    assert container["uncertain"] == [
        "the job is a container job: only runners whose agent found docker or podman take "
        "the run (they carry the label container)"
    ]


def equipped(name, features, version="0.3.0", **fields):
    return runner(name, **fields) | {"features": list(features), "version": version}


def test_an_http_job_no_connected_runners_agent_announced_http_for_names_it():
    answer = why(
        job={"kind": "http"},
        runners=[
            equipped("gpu-1", ["stdin"], version="0.2.0"),
            equipped("gpu-2", [], version=""),
            equipped("web-1", ["stdin", "http"], labels=["linux"]),
        ],
    )

    assert (answer["kind"], answer["reason"], answer["uncertain"]) == (
        "no_runner",
        "the job needs http, which the agents of the runners with labels gpu do not support:"
        " gpu-1 (0.2.0), gpu-2 (version unknown); upgrade croniq-runner",
        [],
    )


def test_an_http_job_a_runner_announced_http_for_is_not_held_by_it():
    answer = why(
        job={"kind": "http"},
        runners=[equipped("gpu-1", ["stdin"], version="0.2.0"), equipped("gpu-2", ["http"])],
    )
    assert (answer["kind"], answer["reason"], answer["uncertain"]) == (
        "free",
        "the 1 runner with labels gpu has 1 free slot: it should start at a runner's next poll",
        [],
    )


def test_a_job_whose_user_no_agent_allows_says_so():
    answer = why(job={"run_as": "etl"}, runners=[equipped("gpu-1", ["stdin", "http"])])
    assert (answer["kind"], answer["reason"]) == (
        "no_runner",
        "the job needs run_as, which the agents of the runners with labels gpu do not allow"
        " (croniq-runner --allow-run-as) or predate: gpu-1 (0.3.0); name the job's user in"
        " their --allow-run-as, or upgrade croniq-runner",
    )


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (
            {"state": "running", "runner": "gpu-1"},
            "it is not pending: it is running on runner gpu-1",
        ),
        ({"state": "failed"}, "it is not pending: it ended failed"),
    ],
)
def test_a_run_that_no_longer_waits_says_so(run, reason):
    answer = why(run=run)

    assert (answer["kind"], answer["reason"], answer["uncertain"]) == ("not_pending", reason, [])


def test_a_queued_run_waits_its_turn_under_the_overlap_policy():
    answer = why(run={"state": "queued"}, job={"overlap": "queue", "max_concurrent": 2})

    assert answer["kind"] == "queued"
    assert answer["reason"] == (
        "it is queued: it waits its turn under the job's overlap policy (queue, "
        "max_concurrent 2), and becomes pending when a live run ends"
    )


def test_a_container_job_no_runners_agent_found_an_engine_for_is_held_by_that():
    answer = why(job={"kind": "container"}, runners=[equipped("gpu-1", ["stdin", "http"])])
    assert answer["kind"] == "no_runner"
    assert answer["reason"].startswith("the job needs container, which the agents of the runners")
    assert answer["uncertain"] == []


@pytest.mark.parametrize(
    "limits", [{"max_memory": 67108864}, {"max_cpu_seconds": 2}, {"on_max_output": "fail"}]
)
def test_a_limited_job_no_runners_agent_announced_limits_for_names_it(limits):
    answer = why(job=limits, runners=[equipped("gpu-1", ["stdin", "http"])])
    assert (answer["kind"], answer["reason"]) == (
        "no_runner",
        "the job needs limits, which the agents of the runners with labels gpu do not support:"
        " gpu-1 (0.3.0); upgrade croniq-runner",
    )


def test_a_job_whose_limits_every_agent_holds_needs_no_limits():
    # max_output alone, cut by the server too, and exit codes it reads itself.
    job = {"max_output": 16384, "on_max_output": "truncate", "success_exit_codes": [0, 3]}
    answer = why(job=job, runners=[equipped("gpu-1", ["stdin", "http"])])
    assert answer["kind"] == "free"
