"""The chaos checks catch the bugs they are meant to catch.

A clean made-up history passes every check; each test then plants one bug
(a duplicate run, an overlap, a silent repair, a wrong counter...) and
expects exactly that check to report it. No processes, no database.
"""

from datetime import UTC, datetime, timedelta

import pytest

from tests.chaos import checks
from tests.chaos.checks import Facts, Run

pytestmark = pytest.mark.chaos

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
STEP = timedelta(seconds=2)


def execution(pk, job, instant, attempt=1, state="succeeded", **extra):
    at = T0 + instant * STEP
    row = dict(
        id=pk, job=job, job_id=1 if job == "solo" else 2, scheduled_for=at, attempt=attempt,
        trigger="schedule" if attempt == 1 else "retry", state=state, lost_reason="",
        created_at=at, claimed_at=at + timedelta(seconds=0.01),
        finished_at=at + timedelta(seconds=1), run_after=at, lease=1, exit_code=0, error="",
        runner="agent-1",
    )  # fmt: skip
    row.update(extra)
    return row


def clean():
    """Three instants of a singleton and a plain job, all run once, all counted."""
    executions, runs = {}, {}
    for i in range(3):
        for job, offset in (("solo", 0), ("many", 10)):
            pk = i + offset + 1
            executions[pk] = execution(pk, job, i)
            start = (T0 + i * STEP).timestamp() + 0.05
            runs[pk] = Run(pk, job, 1, "agent-1#1", start, end=start + 0.5)
    metrics = {
        ("croniq_executions_total", frozenset({("state", "succeeded")})): 6.0,
        ("croniq_fencing_rejections_total", frozenset()): 0.0,
        ("croniq_executions_pending", frozenset()): 0.0,
    }
    facts = Facts(
        jobs={
            1: dict(id=1, name="solo", singleton=True, last=T0 + 2 * STEP, next=None, retries=0),
            2: dict(id=2, name="many", singleton=False, last=T0 + 2 * STEP, next=None, retries=0),
        },
        executions=executions,
        audit=[],
        metrics=[metrics],
        runs=runs,
        deaths={},
        first_instants={"solo": T0, "many": T0},
        disabled_at=T0 + 3 * STEP,
        registered={"agent-1": ["agent-1#1"]},
        started={"agent-1": ["agent-1#1"]},
    )
    return checks.index(facts)


def found(facts):
    """{check name: violations} over every check."""
    instants, fenced, _ = checks.check_instants(checks.index(facts))
    return {
        "instants": instants,
        "fenced": fenced,
        "runs": checks.check_runs(facts),
        "overlap": checks.check_singleton_overlap(facts),
        "queue": checks.check_queue_limit(facts),
        "stuck": checks.check_nothing_stuck(facts),
        "audit": checks.check_repairs_audited(facts),
        "metrics": checks.check_metrics(facts),
        "operator": checks.check_operator_saves(facts),
    }


def only(facts, name):
    """The violations of check `name`; every other check must be clean."""
    results = found(facts)
    others = {k: v for k, v in results.items() if k != name and v}
    assert not others, others
    assert results[name], f"check {name!r} missed the planted bug"
    return results[name]


def test_a_clean_history_has_no_violations():
    assert not any(found(clean()).values()), found(clean())


def test_two_successful_runs_of_one_instant_are_a_duplicate():
    facts = clean()
    facts.executions[12].update(state="lost", lost_reason="lease_expired")
    facts.executions[99] = execution(99, "many", 1, attempt=2)
    facts.runs[99] = Run(99, "many", 2, "agent-1#1", facts.runs[12].start, end=1e10)
    results = found(facts)
    # Two "succeeded" would take a bug: one lost attempt then a retry is fine.
    assert not results["instants"]
    facts.executions[12].update(state="succeeded", lost_reason="")
    assert "2 succeeded executions" in " ".join(found(facts)["instants"])


def test_an_instant_without_execution_or_misfire_is_lost():
    facts = clean()
    del facts.executions[2], facts.runs[2]
    facts.metrics[0][("croniq_executions_total", frozenset({("state", "succeeded")}))] = 5.0
    assert "no execution, no misfire" in only(facts, "instants")[0]


def test_an_instant_dropped_by_an_audited_misfire_is_allowed():
    facts = clean()
    del facts.executions[2], facts.runs[2]
    facts.metrics[0][("croniq_executions_total", frozenset({("state", "succeeded")}))] = 5.0
    first = (T0 + STEP).isoformat()
    facts.audit.append(
        dict(action="job.misfire", target_type="scheduler.job", target_id="1", actor="",
             data={"first_missed": first, "missed": 1, "dropped": 1}, at=T0)
    )  # fmt: skip
    facts.metrics[0][("croniq_misfires_total", frozenset({("job", "solo")}))] = 1.0
    assert not any(found(facts).values()), found(facts)


def test_a_failed_run_without_retry_loses_its_instant():
    facts = clean()
    facts.executions[11].update(state="failed", exit_code=1)
    facts.runs[11].end, facts.runs[11].killed = None, facts.runs[11].start + 0.2
    metrics = facts.metrics[0]
    metrics[("croniq_executions_total", frozenset({("state", "succeeded")}))] = 5.0
    metrics[("croniq_executions_total", frozenset({("state", "failed")}))] = 1.0
    assert "no retry and no audited reason" in only(facts, "instants")[0]


def test_a_skip_while_nothing_of_the_job_was_live_is_unjustified():
    facts = clean()
    facts.executions[3].update(state="skipped", claimed_at=None, exit_code=None)
    del facts.runs[3]
    facts.audit.append(
        dict(action="execution.skipped", target_type="scheduler.execution", target_id="3",
             actor="", data={"live": "1 running"}, at=T0 + 2 * STEP)
    )  # fmt: skip
    metrics = facts.metrics[0]
    metrics[("croniq_executions_total", frozenset({("state", "succeeded")}))] = 5.0
    metrics[("croniq_executions_total", frozenset({("state", "skipped")}))] = 1.0
    metrics[("croniq_singleton_skips_total", frozenset({("job", "solo")}))] = 1.0
    # Execution 1 finished at T0 + 1 s; the skip came at T0 + 4 s + 1 s.
    assert "was not live then" in only(facts, "instants")[0]


def test_overlapping_runs_of_a_singleton_job_are_reported():
    facts = clean()
    facts.runs[2].start = facts.runs[1].start + 0.2  # while run 1 still went on
    assert "overlap" in only(facts, "overlap")[0]


def test_a_run_on_a_killed_machine_lasts_until_the_kill():
    facts = clean()
    run = facts.runs[1]
    run.end = None
    assert "never ended" in found(facts)["overlap"][0]
    facts.deaths["agent-1#1"] = run.start + 1.0  # SIGKILLed before the next run began
    assert not found(facts)["overlap"]
    facts.deaths["agent-1#1"] = run.start + 2.5  # ... or after it began
    assert "execution 2 on agent-1#1" in found(facts)["overlap"][0]


def test_a_long_run_overlapping_several_later_runs_is_reported_for_each():
    facts = clean()
    facts.runs[1].end = facts.runs[1].start + 4.5  # spans the runs of instants 2 and 3
    overlaps = only(facts, "overlap")
    assert len(overlaps) == 2, overlaps
    assert "execution 3" in overlaps[1] and "execution 1 " in overlaps[1]


def test_a_success_without_a_completed_run_in_the_ledger_is_reported():
    facts = clean()
    facts.runs[12].end = None
    results = found(facts)
    assert "no completed run" in " ".join(results["runs"])


def test_an_execution_started_twice_is_reported():
    facts = clean()
    facts.runs[12].starts = 2
    assert "started 2 times" in only(facts, "runs")[0]


def test_an_execution_left_pending_is_stuck():
    facts = clean()
    facts.executions[50] = execution(50, "many", 2, attempt=2, state="pending", claimed_at=None)
    facts.executions[50]["trigger"] = "retry"
    facts.executions[13].update(state="lost", lost_reason="lease_expired")
    facts.runs[13].end = None
    results = found(facts)
    assert "left pending" in " ".join(results["stuck"])


def test_a_lost_execution_without_a_reap_event_is_a_silent_repair():
    facts = clean()
    facts.executions[13].update(state="lost", lost_reason="lease_expired")
    facts.executions[51] = execution(51, "many", 2, attempt=2)
    facts.runs[51] = Run(51, "many", 2, "agent-1#1", facts.runs[13].start + 5, end=1e10)
    facts.audit.append(
        dict(action="execution.retry", target_type="scheduler.execution", target_id="51",
             actor="", data={"previous": 13, "previous_state": "lost"}, at=T0)
    )  # fmt: skip
    metrics = facts.metrics[0]
    metrics[("croniq_executions_total", frozenset({("state", "lost")}))] = 1.0
    metrics[("croniq_executions_reaped_total", frozenset({("reason", "lease_expired")}))] = 1.0
    metrics[("croniq_retries_total", frozenset({("reason", "lost")}))] = 1.0
    results = found(facts)
    assert "reaped audit events []" in results["audit"][0]
    # ... and the reap counter no longer agrees with the audit.
    assert "croniq_executions_reaped_total" in results["metrics"][0]


def test_a_counter_that_disagrees_with_the_database_is_reported():
    facts = clean()
    facts.metrics[0][("croniq_fencing_rejections_total", frozenset())] = 2.0
    assert "croniq_fencing_rejections_total" in only(facts, "metrics")[0]


def test_a_scheduler_that_stopped_firing_before_the_end_is_reported():
    facts = clean()
    facts.disabled_at = T0 + timedelta(minutes=5)
    assert "stopped firing" in " ".join(only(facts, "instants"))


def test_a_total_is_summed_over_every_label_of_its_family():
    facts = clean()
    facts.audit += [
        dict(action="runner.flapping", target_type="runners.runner", target_id=str(pk),
             actor=name, data={}, at=T0)
        for pk, name in ((1, "agent-1"), (2, "agent-2"))
    ]  # fmt: skip
    metrics = facts.metrics[0]
    metrics[("croniq_runner_flaps_total", frozenset({("runner", "agent-1")}))] = 1.0
    assert "croniq_runner_flaps_total is 1.0" in only(facts, "metrics")[0]
    metrics[("croniq_runner_flaps_total", frozenset({("runner", "agent-2")}))] = 1.0
    assert not found(facts)["metrics"]


def operator_save(data):
    return dict(action="job.changed", target_type="scheduler.job", target_id="1",
                actor="chaos-operator", data=data, at=T0)  # fmt: skip


def test_an_operator_save_of_the_description_alone_is_fine():
    facts = clean()
    facts.audit.append(operator_save({"description": ["", "edited"]}))
    assert not any(found(facts).values())


def test_an_operator_save_that_adopts_an_applied_job_is_fine():
    facts = clean()
    adopted = {"managed_by": ["apply", "admin"], "managed_source": ["croniq", ""]}
    facts.audit.append(operator_save({"description": ["", "edited"], **adopted}))
    assert not any(found(facts).values())


def test_an_operator_save_that_wrote_the_loops_fields_is_reported():
    facts = clean()
    facts.audit.append(operator_save({"description": ["", "x"], "next_run_at": ["a", "b"]}))
    assert "wrote ['description', 'next_run_at']" in only(facts, "operator")[0]


def test_a_quarantined_job_is_reported():
    facts = clean()
    facts.audit.append(
        dict(action="job.error", target_type="scheduler.job", target_id="1", actor="",
             data={"error": "IntegrityError: ..."}, at=T0)
    )  # fmt: skip
    facts.metrics[0][("croniq_job_errors_total", frozenset({("job", "solo")}))] = 1.0
    assert "quarantined: IntegrityError" in only(facts, "operator")[0]


def test_more_runs_of_a_queue_job_than_its_max_concurrent_are_reported():
    facts = clean()
    facts.jobs[2].update(overlap="queue", max_concurrent=2)
    facts.runs[12].start = facts.runs[11].start + 0.1  # two at once: within the limit
    assert not found(facts)["queue"]
    facts.runs[13].start = facts.runs[11].start + 0.2  # a third while both still run
    [violation] = only(facts, "queue")
    assert "3 runs" in violation and "max_concurrent 2" in violation


def test_an_end_torn_by_the_kill_is_no_end_but_garbage_is_malformed(tmp_path):
    ledger = tmp_path / "ledger"
    ledger.write_text(
        "start 7 solo 1 agent-1 100.5\n"
        "end 7\n"  # `date` died with the job's process group
        "killed 7 101.25\n"
        "start 8 solo 1 agent-1\n"
        "end 9 102.0\n"
    )
    runs, malformed = checks.read_ledger(ledger)
    assert (runs[7].end, runs[7].killed) == (None, 101.25)
    assert 8 not in runs
    assert malformed == 2
