"""croniq-runner against a real server: real uvicorn, real agent process, real jobs.

The tests of this module share one server and database; each test uses its
own labels and runner names, so no test's agent can take another's work.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import croniq_runner
from harness.processes import (
    Server,
    drop_database,
    migrated_database,
    query,
    start_agent,
    wait_for,
)
from harness.runner_venv import bare_env, run, runner_venv
from harness.tcp_proxy import TcpProxy
from tests.agent.world import (
    add_execution,
    add_executions,
    django,
    executions,
    issue_token,
    ready,
    request_cancel,
)

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("agent-world")
    db = migrated_database(tmp)
    try:
        server = Server(db, tmp / "web.log", CRONIQ_HEARTBEAT_INTERVAL=0.5)
        try:
            token = issue_token(db)  # while the server boots
            yield SimpleNamespace(db=db, server=ready(server), token=token)
        finally:
            server.stop()
    finally:
        drop_database(db)


@pytest.fixture
def agents(world, tmp_path, request):
    """Start agents labelled after the test; stopped (and their logs shown) at the end."""
    started = []
    label = request.node.name.replace("[", "-").replace("]", "")[:90]

    def start(*args, name=None, token=None, **env):
        name = name or f"{label}-{len(started)}"
        log = tmp_path / f"agent-{len(started)}.log"
        agent = start_agent(
            world.server.url,
            token or world.token,
            log,
            "--name",
            name,
            "--labels",
            label,
            "--poll-wait",
            "5",
            *args,
            **env,
        )
        started.append(agent)
        return agent

    start.label = label
    yield start
    for agent in started:
        agent.stop()
        print(f"--- {agent.log_path}\n{agent.output()}")


# A stop test's agent logs each poll as it goes out, and its polls outlast
# the test: a five-second poll could end unanswered on a loaded machine
# before the test's late work arrived, and the draining agent not poll again.
DRAINING = ("--log-level", "DEBUG", "--poll-wait", "30")
# What a job sleeps that only a kill may end early: a run reported, or an
# agent exited, within half of it was ended by the agent.
LONG = 120


def poll_for_the_free_slot_sent(agent):
    """The agent's poll for the slot its one running job leaves free (of
    two) has gone out: a stop now no longer keeps it from the server. A
    fixed sleep raced it on a loaded machine, and the late work never came."""
    wait_for(
        lambda: "polling for 1 free slot" in agent.output(),
        message=f"the poll for the free slot:\n{agent.output()}",
    )


def reported(agent, count=1, timeout=20):
    wait_for(
        lambda: (
            agent.output().count(" reported: ") + agent.output().count("server refused the")
            >= count
        ),
        timeout=timeout,
        message=f"{count} report(s) in the agent log:\n{agent.output()}",
    )


def exit_code(agent, timeout=15):
    wait_for(lambda: not agent.alive(), timeout=timeout, message="the agent to exit")
    return agent.popen.returncode


def process_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    # A zombie (no init reaping in some containers) is dead for our purposes.
    return status.exists() and "State:\tZ" in status.read_text()


def test_output_arrives_in_order_with_the_job_environment(world, agents):
    script = (
        'echo "job=$CRONIQ_JOB id=$CRONIQ_EXECUTION_ID attempt=$CRONIQ_ATTEMPT '
        'at=$CRONIQ_SCHEDULED_FOR greeting=$GREETING"; '
        'i=0; while [ $i -lt 2000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done; '
        "echo 'grüße, 漢字'"
    )
    job = f"{agents.label}-job"
    eid = add_execution(world.db, job, script, labels=[agents.label], env={"GREETING": "hi"})
    agent = agents("--once")
    assert exit_code(agent) == 0

    [run] = executions(world.db, job)
    assert (run["state"], run["exit_code"]) == ("succeeded", 0)
    lines = run["log"].splitlines()
    assert lines[0].startswith(f"job={job} id={eid} attempt=1 at=")
    assert lines[0].endswith(" greeting=hi")
    expected = [f"{kind} {i}" for i in range(2000) for kind in ("out", "err")]
    assert lines[1:-1] == expected
    assert lines[-1] == "grüße, 漢字"
    # ~28 KB of output cannot fit one batch: several, numbered in order.
    assert len(run["seqs"]) >= 2
    assert run["seqs"] == list(range(1, len(run["seqs"]) + 1))


def test_exit_codes_and_signals_are_reported(world, agents):
    job = agents.label
    commands = {"ok": "exit 0", "fails": "echo bad >&2; exit 7", "killed": "kill -KILL $$"}
    add_executions(
        world.db,
        *(dict(job=f"{job}-{name}", command=cmd, labels=[job]) for name, cmd in commands.items()),
    )
    agent = agents("--capacity", "3")
    reported(agent, 3)

    runs = {run["job"]: run for run in executions(world.db, *(f"{job}-{n}" for n in commands))}
    outcome = {name: (run["state"], run["exit_code"], run["error"]) for name, run in runs.items()}
    assert outcome == {
        f"{job}-ok": ("succeeded", 0, ""),
        f"{job}-fails": ("failed", 7, ""),
        f"{job}-killed": ("failed", None, "terminated by SIGKILL"),
    }
    assert agent.alive()


def test_runs_that_end_while_a_report_is_on_its_way_are_reported_together(world, agents, tmp_path):
    """The reports of runs that end while the server cannot be reached queue
    behind the call on its way, and reach it together, each with its own
    outcome."""
    job = agents.label
    # Each run waits for the gate, opened once the cable is pulled: with a
    # fixed sleep, a loaded machine started the last runs after the first
    # had ended, and twelve were never running at once.
    gate = tmp_path / "gate"
    wait_for_gate = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    specs = [dict(job=f"{job}-{n}", command=wait_for_gate, labels=[job]) for n in range(11)]
    specs.append(dict(job=f"{job}-fails", command=f"{wait_for_gate}; exit 5", labels=[job]))
    proxy = TcpProxy(world.server.port)
    agent = start_agent(
        proxy.url,
        world.token,
        tmp_path / "agent.log",
        *("--name", job, "--labels", job, "--capacity", "12", "--log-level", "debug"),
    )
    try:
        add_executions(world.db, *specs)
        names = [spec["job"] for spec in specs]
        wait_for(
            lambda: [run["state"] for run in executions(world.db, *names)] == ["running"] * 12,
            message="all twelve running",
            timeout=60,
        )
        proxy.cut()
        gate.touch()
        wait_for(lambda: agent.output().count(" ended: exit code ") == 12, message="all ended")
        proxy.heal()
        reported(agent, 12)

        outcomes = {
            run["job"]: (run["state"], run["exit_code"]) for run in executions(world.db, *names)
        }
        assert outcomes == {
            **{name: ("succeeded", 0) for name in names[:-1]},
            f"{job}-fails": ("failed", 5),
        }
        calls = re.findall(r"reported (\d+) run\(s\) in one call", agent.output())
        # The call on its way when the cable was pulled (retried), then all
        # the others in one.
        assert sum(int(n) for n in calls) == 12
        assert len(calls) <= 2, calls
    finally:
        agent.stop()
        proxy.close()


def test_a_job_past_its_timeout_is_killed_with_its_children(world, agents, tmp_path):
    pidfile = tmp_path / "child.pid"
    job = agents.label
    command = f"echo started; sleep {LONG} & echo $! > {pidfile}; wait"
    add_execution(world.db, job, command, labels=[job], timeout=1)
    agent = agents("--kill-grace", "1")
    reported(agent, timeout=LONG / 2)  # the job alone would sleep LONG

    [run] = executions(world.db, job)
    assert run["state"] == "timed_out"
    assert run["exit_code"] is None
    assert run["error"].startswith("timed out after 1s")
    assert "started" in run["log"]
    assert wait_for(lambda: process_gone(int(pidfile.read_text())), timeout=LONG / 2)


def test_an_operator_cancel_stops_a_running_job(world, agents, tmp_path):
    job = agents.label
    marker = tmp_path / "still-running"
    command = f"echo started; while true; do touch {marker}; sleep 0.1; done"
    eid = add_execution(world.db, job, command, labels=[job])
    agent = agents()
    # The first line reaches the server while the job runs (batches leave every second).
    wait_for(
        lambda: "started" in executions(world.db, job)[0]["log"],
        timeout=15,
        message="the first output line on the server",
    )
    assert request_cancel(world.db, eid) == 1
    reported(agent)

    [run] = executions(world.db, job)
    assert run["state"] == "cancelled"
    assert "cancelled on the server's request" in run["error"]
    marker.unlink()
    time.sleep(0.5)
    assert not marker.exists()


def test_sigterm_lets_the_running_job_finish_then_exits_0(world, agents):
    job = agents.label
    add_execution(world.db, job, "echo begin; sleep 2; echo done", labels=[job])
    agent = agents("--drain-timeout", "30")
    wait_for(lambda: "started" in agent.output(), message="the job to start")
    agent.popen.send_signal(signal.SIGTERM)
    assert exit_code(agent) == 0

    [run] = executions(world.db, job)
    assert (run["state"], run["exit_code"]) == ("succeeded", 0)
    assert run["log"] == "begin\ndone\n"
    assert "received SIGTERM" in agent.output()


def test_sigterm_kills_jobs_that_outlive_the_drain_timeout_and_reports_them(
    world, agents, tmp_path
):
    pidfile = tmp_path / "job.pid"
    job = agents.label
    add_execution(world.db, job, f"echo $$ > {pidfile}; sleep {LONG}", labels=[job])
    agent = agents("--drain-timeout", "1", "--kill-grace", "1")
    wait_for(lambda: "started" in agent.output(), message="the job to start")
    agent.popen.send_signal(signal.SIGINT)
    assert exit_code(agent, timeout=LONG / 2) == 0  # the job alone would sleep LONG

    [run] = executions(world.db, job)
    assert run["state"] == "failed"
    assert "runner shut down" in run["error"]
    assert process_gone(int(pidfile.read_text()))


def test_work_that_reaches_a_draining_agent_is_handed_back_unstarted(world, agents, tmp_path):
    """A stopping agent's long-poll is still in flight while its jobs drain;
    work it brings back is given back at once, not left to its lease."""
    job = agents.label
    # The running job ends when the test says, once the late work is handed
    # back: with a fixed sleep it ended first on a loaded machine, the drain
    # was over, and the agent left with the late work's poll cut instead.
    gate = tmp_path / "end-the-first-run"
    add_execution(
        world.db, job, f"echo busy; while [ ! -e {gate} ]; do sleep 0.05; done", labels=[job]
    )
    agent = agents(*DRAINING, "--capacity", "2", "--drain-timeout", "30")
    wait_for(lambda: "started" in agent.output(), message="the first job to start")
    poll_for_the_free_slot_sent(agent)
    agent.popen.send_signal(signal.SIGTERM)
    wait_for(lambda: "draining" in agent.output(), message="the agent to drain")
    late = add_execution(world.db, f"{job}-late", "echo never", labels=[job])

    def handed_back():
        [run] = executions(world.db, f"{job}-late")
        return run["state"] == "pending" and "handed back" in agent.output() and run

    run = wait_for(handed_back, timeout=30, message="the late execution to be handed back")
    assert (run["id"], run["attempt"], run["claimed_at"]) == (late, 1, None)
    gate.touch()
    assert exit_code(agent, timeout=20) == 0
    [first] = executions(world.db, job)
    assert first["state"] == "succeeded"  # the drain still let the running job finish


def test_work_the_last_run_of_a_drain_lets_in_is_handed_back_not_taken_away(
    world, agents, tmp_path
):
    """The run a draining agent waits for ends, and its end promotes the
    job's queued run, which the server claims at once for the agent's long
    poll still in flight (the slot the run freed). The agent exits right
    after that run's report: the answer must still be read and its work
    handed back, not left running on a runner that is gone."""
    job = agents.label
    # The first run ends when the test says, once the agent drains: a run
    # of fixed seconds could end before the stop on a loaded machine.
    gate = tmp_path / "end-the-first-run"
    first = add_execution(
        world.db,
        job,
        f"echo busy; while [ ! -e {gate} ]; do sleep 0.05; done",
        labels=[job],
        overlap="queue",
        max_concurrent=1,
    )
    agent = agents(*DRAINING, "--capacity", "2", "--drain-timeout", "30")
    wait_for(lambda: "started" in agent.output(), message="the first run to start")
    queued = django(
        world.db,
        f"""
        job = Job.objects.get(name={job!r})
        out(Execution.objects.create(
            job=job, scheduled_for=now, state="queued", run_after=now, created_at=now
        ).pk)
        """,
    )
    poll_for_the_free_slot_sent(agent)
    agent.popen.send_signal(signal.SIGTERM)
    wait_for(lambda: "draining" in agent.output(), message="the agent to drain")
    gate.touch()
    assert exit_code(agent, timeout=20) == 0

    runs = {run["id"]: run for run in executions(world.db, job)}
    assert runs[first]["state"] == "succeeded"
    late = runs[queued]
    assert (late["state"], late["attempt"], late["claimed_at"]) == ("pending", 1, None)
    assert f"execution(s) [{queued}] arrived while stopping; handed back" in agent.output()


def test_an_idle_agent_stops_at_once_without_waiting_out_its_long_poll(agents):
    agent = agents("--log-level", "DEBUG", "--poll-wait", "60")  # the most the server allows
    wait_for(lambda: "polling for 1 free slot" in agent.output(), message="the agent to poll")
    agent.popen.send_signal(signal.SIGTERM)
    assert exit_code(agent, timeout=60 / 2) == 0  # not the poll's 60 s
    assert "exiting with a long-poll in flight" in agent.output()


def test_a_bad_token_exits_non_zero_with_a_clear_message(world, agents):
    agent = agents(token="crq_not-a-real-token")
    assert exit_code(agent) == 3
    assert "the server refused to register runner" in agent.output()
    assert "(HTTP 401" in agent.output()
    assert "check --token / CRONIQ_TOKEN" in agent.output()


def test_a_registration_the_server_finds_invalid_exits_2_instead_of_retrying(agents):
    agent = agents("--labels", "x" * 101)
    assert exit_code(agent) == 2
    assert "the server refused the registration (HTTP 422" in agent.output()


def test_an_agent_superseded_by_another_process_exits_instead_of_fighting(world, agents):
    name = f"{agents.label}-shared"
    first = agents(name=name)
    wait_for(lambda: "connected" in first.output(), message="the first agent to register")
    second = agents(name=name)
    assert exit_code(first) == 4
    assert f"another process took over runner '{name}'" in first.output()
    assert "took over runner" in second.output()
    time.sleep(1)
    assert second.alive()


def test_the_agent_runs_from_its_wheel_in_a_virtualenv_with_only_requests(world, tmp_path):
    bare_venv = runner_venv()
    packages = run([bare_venv / "python", "-m", "pip", "--version"], tmp_path)
    assert packages.returncode != 0  # not even pip: only what the agent needs
    no_django = run([bare_venv / "python", "-c", "import django"], tmp_path)
    assert "ModuleNotFoundError" in no_django.stderr
    no_server = run([bare_venv / "python", "-c", "import runners"], tmp_path)
    assert "ModuleNotFoundError" in no_server.stderr
    where = run(
        [bare_venv / "python", "-c", "import croniq_runner as r; print(r.__file__)"], tmp_path
    )
    assert where.returncode == 0, where.stderr
    [site_packages] = bare_venv.parent.glob("lib/python*/site-packages")
    assert where.stdout.startswith(str(site_packages / "croniq_runner"))

    help_text = run([bare_venv / "croniq-runner", "--help"], tmp_path)
    assert help_text.returncode == 0
    assert "--server URL" in help_text.stdout

    add_execution(world.db, "bare", 'echo "from $CRONIQ_JOB"; exit 4', labels=["bare"])
    log = tmp_path / "agent.log"
    with open(log, "w") as output:
        agent = subprocess.Popen(
            [bare_venv / "croniq-runner", "--once", "--labels", "bare", "--poll-wait", "2"]
            + ["--name", "bare"],
            cwd=tmp_path,
            env={
                **bare_env(),
                "CRONIQ_SERVER": world.server.url,
                "CRONIQ_TOKEN": world.token,
                "CRONIQ_STATE_DIR": str(tmp_path / "agent-state"),
                "CRONIQ_ENGINE": "none",
            },
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            assert agent.wait(30) == 0, Path(log).read_text()
        finally:
            agent.kill()
    assert " reported: failed" in log.read_text()
    [execution] = executions(world.db, "bare")
    assert (execution["exit_code"], execution["log"]) == (4, "from bare\n")
    [(version,)] = query(world.db, "SELECT version FROM runners_runner WHERE name = %s", ("bare",))
    assert version == croniq_runner.__version__


def test_a_name_registered_with_another_token_is_refused_and_the_owner_keeps_it(world, agents):
    owner = agents()
    wait_for(lambda: "connected" in owner.output(), message="the owner to register")
    name = f"{agents.label}-0"
    intruder = agents(name=name, token=issue_token(world.db, f"{agents.label}-other"))
    assert exit_code(intruder) == 3
    assert f"the server refused to register runner '{name}' (HTTP 403" in intruder.output()
    assert "the name belongs to another token" in intruder.output()
    assert owner.alive()
