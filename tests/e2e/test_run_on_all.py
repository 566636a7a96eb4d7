"""run_on: all with real processes: the server, the scheduler loop and
real agents, three carrying the label `fleet` and one that does not. Each
occurrence runs once on every fleet runner online at its instant, each run
pinned to its runner and run by it; with stagger the runners start that far
apart in the order of their names; a runner that comes online later gets
only the occurrences after it. Replaying one runner's dead letter runs it
again on that runner alone."""

from datetime import UTC, datetime

import pytest

from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from tests.agent.world import issue_token, ready

pytestmark = pytest.mark.e2e

SETTINGS = dict(CRONIQ_HEARTBEAT_INTERVAL=1)
FLEET = ["fleet-a", "fleet-b", "fleet-c"]
# What each run writes: the agent it ran on, its execution, when it started.
WRITE = 'echo "$CRONIQ_RUNNER_NAME $CRONIQ_EXECUTION_ID $(date +%s.%N)" >> {out}'


def runs(db, job):
    """{scheduled_for: [(id, pinned_to, runner name, state, lease, session,
    exit_code, claimed_at, created_at, run_after)]}, each occurrence's runs by
    name."""
    rows = query(
        db,
        "SELECT e.scheduled_for, e.id, e.pinned_to, r.name, e.state, e.lease, e.session,"
        " e.exit_code, e.claimed_at, e.created_at, e.run_after"
        " FROM scheduler_execution e JOIN scheduler_job j ON j.id = e.job_id"
        " LEFT JOIN runners_runner r ON r.id = e.runner_id"
        " WHERE j.name = %s ORDER BY e.scheduled_for, e.pinned_to",
        (job,),
    )
    occurrences = {}
    for scheduled_for, *run in rows:
        occurrences.setdefault(str(scheduled_for), []).append(tuple(run))
    return occurrences


def settled(db, job, *sizes):
    """The occurrences of `job` with as many runs as one of `sizes`, all of
    them ended."""
    return {
        at: group
        for at, group in runs(db, job).items()
        if len(group) in sizes and all(run[3] not in ("pending", "running") for run in group)
    }


def online(db):
    return dict(query(db, "SELECT name, registered_at FROM runners_runner WHERE state = 'online'"))


def seconds(value):
    """A timestamp column as epoch seconds (SQLite returns text)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def gaps(times):
    times = list(times)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def written(path):
    """{execution id: (runner name, start time)} from the runs' file."""
    lines = path.read_text().split("\n") if path.exists() else []
    return {int(e): (name, float(at)) for name, e, at in (line.split() for line in lines if line)}


def logs(db, execution_id):
    rows = query(
        db,
        "SELECT data FROM scheduler_logchunk WHERE execution_id = %s ORDER BY seq",
        (execution_id,),
    )
    return "".join(data for (data,) in rows)


def test_each_occurrence_runs_once_on_every_fleet_runner_online_at_its_instant(tmp_path):
    db = migrated_database(tmp_path)
    everywhere, rolling = tmp_path / "everywhere.txt", tmp_path / "rolling.txt"
    processes = []
    try:
        server = Server(db, tmp_path / "web.log", **SETTINGS)
        processes.append(server)
        token = issue_token(db)
        processes.append(start_loop(db, tmp_path / "loop.log", **SETTINGS))
        ready(server)

        def agent(name, labels):
            # The name comes from the environment, which the agent's jobs
            # inherit: each run can tell which agent ran it.
            args = ("--labels", labels, "--capacity", "2", "--poll-wait", "5")
            log = tmp_path / f"{name}.log"
            process = start_agent(server.url, token, log, *args, CRONIQ_RUNNER_NAME=name)
            processes.append(process)
            return process

        for name in FLEET:
            agent(name, "fleet,linux")
        agent("other", "linux")
        wait_for(lambda: len(online(db)) == 4, timeout=30, message="four runners online")

        # Applied once every runner is online, so each occurrence sees all four.
        (tmp_path / "jobs.yaml").write_text(f"""
jobs:
  - name: everywhere
    schedule: "@every 5s"
    command: 'echo "ran on $CRONIQ_RUNNER_NAME"; {WRITE.format(out=everywhere)}'
    labels: [fleet]
    run_on: all
  - name: rolling
    schedule: "@every 7s"
    command: '{WRITE.format(out=rolling)}'
    labels: [fleet]
    run_on: all
    stagger: 2s
""")  # fmt: skip
        manage(db, "apply", str(tmp_path / "jobs.yaml"))

        # Generous: under CI's four side-by-side runs the first occurrence once
        # took over 20 s to settle. A timeout says what the runs were then.
        try:
            done = wait_for(lambda: settled(db, "everywhere", 3), timeout=60, message="a fan-out")
        except AssertionError as timed_out:
            raise AssertionError(
                f"{timed_out}; runs: {runs(db, 'everywhere')}; online: {online(db)}"
            ) from None
        first_at, first = sorted(done.items())[0]
        assert [run[1] for run in first] == FLEET  # pinned_to, in name order
        assert [run[2] for run in first] == FLEET  # and claimed by that runner
        assert {run[3] for run in first} == {"succeeded"}
        assert {run[6] for run in first} == {0}  # each its own exit code
        assert all(run[4] >= 1 and run[5] for run in first)  # each its own lease
        assert len({run[5] for run in first}) == 3  # held by three sessions
        ran = written(everywhere)
        for execution_id, pinned_to, *_ in first:
            assert ran[execution_id][0] == pinned_to  # run by the agent it is pinned to
            assert f"ran on {pinned_to}" in logs(db, execution_id)  # its own log
        assert len({run[9] for run in first}) == 1  # no stagger: one turn for all

        # The fourth fleet runner comes online after this occurrence fired.
        fired_before = set(runs(db, "everywhere"))
        agent("fleet-d", "fleet")
        joined = wait_for(lambda: online(db).get("fleet-d"), timeout=20, message="fleet-d online")
        later = wait_for(lambda: settled(db, "everywhere", 4), timeout=20, message="four runs")

        # The first staggered occurrence: on three or, fired after fleet-d
        # joined, four runners.
        staggered = wait_for(lambda: settled(db, "rolling", 3, 4), timeout=10, message="stagger")
        _, steps = sorted(staggered.items())[0]
        names = [run[1] for run in steps]
        assert names == [run[2] for run in steps] == [*FLEET, "fleet-d"][: len(steps)]
        assert {run[3] for run in steps} == {"succeeded"}
        # The turns are 2 s apart in name order (the first one further when
        # the loop fired late: the turns after it count from the firing).
        # How soon after its turn each runner claims is the machine's speed,
        # so only "never before its turn" is asserted of the claims.
        turns = [seconds(run[9]) for run in steps]
        spacing = gaps(turns)
        assert spacing[0] >= 2 and all(abs(gap - 2) < 0.001 for gap in spacing[1:]), spacing
        started = written(rolling)
        for run, turn in zip(steps, turns, strict=True):
            assert seconds(run[7]) >= turn, (run, turn)  # claimed in its turn
            assert started[run[0]][1] >= turn, (run, turn)  # by the agent's clock

        every = runs(db, "everywhere")
        for at in fired_before:
            assert "fleet-d" not in {run[1] for run in every[at]}, at
        registered = seconds(joined)
        for at, group in every.items():
            if any(seconds(run[8]) < registered for run in group):  # fired before it joined
                assert "fleet-d" not in {run[1] for run in group}, at
        for at, group in later.items():
            assert [run[1] for run in group] == [*FLEET, "fleet-d"]
            assert [run[2] for run in group] == [*FLEET, "fleet-d"]
            assert at > first_at
        # Every run that ended was run by the agent it is pinned to.
        ran = written(everywhere)
        for group in every.values():
            for execution_id, pinned_to, _, state, *_ in group:
                if state == "succeeded":
                    assert ran[execution_id][0] == pinned_to
        # Nothing ever ran on the runner without the label.
        for job in ("everywhere", "rolling"):
            for group in runs(db, job).values():
                assert "other" not in {run[1] for run in group} | {run[2] for run in group}
        assert "other" not in {name for name, _ in written(everywhere).values()}
    finally:
        for process in processes:  # all at once: each agent takes a moment to drain
            if process.alive():
                process.popen.terminate()
        for process in reversed(processes):
            process.stop()
            print(f"--- {process.log_path}\n{process.output()}")
        drop_database(db)
