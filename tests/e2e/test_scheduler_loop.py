"""Real scheduler_loop (and serve) processes: exactly-once firing and clean shutdown."""

import signal
import time

import pytest
import yaml

from harness.processes import LAYOUTS, OneProcess, manage, query, start_loop, wait_for

pytestmark = pytest.mark.e2e

JOBS = 6
RUN_SECONDS = 6


def apply_every_second_jobs(database, tmp_path):
    document = {
        "jobs": [
            {"name": f"tick-{i}", "schedule": "@every 1s", "command": "true"} for i in range(JOBS)
        ]
    }
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(document))
    manage(database, "apply", str(path))


def start_scheduling(layout, database, log_path):
    """A process that runs the scheduler loop: scheduler_loop, or serve."""
    if layout == "serve":
        return OneProcess(database, log_path).wait_ready()
    return start_loop(database, log_path)


@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)
def test_two_loops_fire_every_instant_exactly_once(layout, e2e_database, tmp_path):
    apply_every_second_jobs(e2e_database, tmp_path)
    loops = [start_scheduling(layout, e2e_database, tmp_path / f"loop-{i}.log") for i in range(2)]
    try:
        # Both running before the window starts: on a busy machine a start-up
        # took longer than the window, and the stop found no loop to stop.
        for loop in loops:
            wait_for(
                lambda loop=loop: "scheduler loop started" in loop.output(),
                timeout=60,
                message="the loop to start",
            )
        time.sleep(RUN_SECONDS)
    finally:
        codes = [loop.stop() for loop in loops]
    assert codes == [0, 0], [loop.output() for loop in loops]

    rows = query(
        e2e_database,
        "SELECT j.name, e.scheduled_for, e.attempt FROM scheduler_execution e "
        "JOIN scheduler_job j ON j.id = e.job_id ORDER BY j.name, e.scheduled_for",
    )
    by_job = {}
    for name, scheduled_for, _ in rows:
        by_job.setdefault(name, []).append(str(scheduled_for))
    assert len(by_job) == JOBS
    for name, instants in by_job.items():
        assert len(instants) == len(set(instants)), f"{name} fired an instant twice"
        assert len(instants) >= RUN_SECONDS - 2, f"{name} missed instants: {instants}"
    # Consecutive instants are exactly one second apart: nothing was skipped.
    import datetime as dt

    for instants in by_job.values():
        parsed = [dt.datetime.fromisoformat(i.replace(" ", "T")) for i in instants]
        gaps = {(b - a).total_seconds() for a, b in zip(parsed, parsed[1:], strict=False)}
        assert gaps == {1.0}


def test_sigterm_finishes_the_tick_and_exits_zero(e2e_database, tmp_path):
    loop = start_loop(e2e_database, tmp_path / "loop.log")
    wait_for(lambda: "scheduler loop started" in loop.output(), message="loop start")
    loop.popen.send_signal(signal.SIGTERM)
    assert loop.popen.wait(10) == 0
    assert "scheduler loop stopped" in loop.output()
    loop.stop()


def test_once_runs_a_single_tick(e2e_database, tmp_path):
    apply_every_second_jobs(e2e_database, tmp_path)
    time.sleep(1.1)
    result = manage(e2e_database, "scheduler_loop", "--once")
    assert result.returncode == 0
    assert query(e2e_database, "SELECT COUNT(*) FROM scheduler_execution")[0][0] >= JOBS
