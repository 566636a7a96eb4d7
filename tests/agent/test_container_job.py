"""A container job on the agent (docs/design.md §15), against a stand-in for
the engine's command line (tests/agent/fake_engine.py): what the agent asks
of the engine and when. The real engine's behaviour is tested in
tests/docker/test_container_jobs.py."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from croniq_runner import engine as engines
from croniq_runner.agent import Agent
from croniq_runner.config import Config, UsageError, parse_args
from croniq_runner.container_job import ContainerJob, Spec
from croniq_runner.engine import Engine, EngineMissing
from croniq_runner.exits import EXIT_USAGE, Fatal
from croniq_runner.job import SUPERVISOR, Job
from croniq_runner.ledger import Ledger
from croniq_runner.timing import LeaseBook
from tests.agent import fake_engine
from tests.agent.test_job import RecordingServer

SECRET = "pw-0d1f-not-for-argv"
NAME = "croniq-9-1-s1"  # the container of execution 9, attempt 1, session "s1"


@pytest.fixture
def engine(tmp_path):
    """A fake docker (tests/agent/fake_engine.py) and its state directory."""
    state = tmp_path / "engine"
    path = fake_engine.install(state) / "docker"
    return Engine("docker", str(path)), state


def start(engine, container, ledger=None, **assignment):
    done = threading.Event()
    job = ContainerJob(
        {
            "id": 9,
            "lease": 4,
            "command": "",
            "job": "render",
            "attempt": 1,
            "kind": "container",
            "container": {"pull": "never", "args": [], "env": {}, **container},
            "trigger": "manual",
            **assignment,
        },
        engine=engine,
        client=(server := RecordingServer()),
        session="s1",
        work_dir="/",
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
        ledger=ledger,
    )
    job.start()
    return job, server, done


def run(engine, container, wait=20, **assignment):
    job, server, done = start(engine, container, **assignment)
    assert done.wait(wait), "the run did not end"
    return job, server


def logged(server):
    return "".join(body["data"] for body in server.bodies("logs"))


def finished(server):
    [finish] = server.bodies("finish")
    return {k: v for k, v in finish.items() if k not in ("session", "lease")}


def wait_for(predicate, timeout=20, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message}")


# -- the container's command line ---------------------------------------------------


def test_the_run_command_names_the_container_and_takes_its_env_from_standard_input():
    spec = Spec.of({"image": "alpine:3.20", "args": ["sh", "-c", "x"], "network": "none"})
    labels = {"croniq.execution": "9"}
    docker = Engine("docker", "/usr/bin/docker")
    assert engines.run_command(docker, NAME, spec.as_run(), labels) == [
        "/usr/bin/docker", "run", "--rm", "--name", NAME, "--pull", "missing",
        "--network", "none", "--env-file", "/dev/stdin", "--sig-proxy=false",
        "--label", "croniq.execution=9", "--", "alpine:3.20", "sh", "-c", "x",
    ]  # fmt: skip
    assert engines.container_name(9, 1, "0123456789abcdef") == "croniq-9-1-01234567"


@pytest.mark.parametrize(
    ("container", "error"),
    [
        ({"image": "-v"}, "container.image: not an image reference"),
        ({"image": "a", "args": "sh"}, "container.args: not a list of text"),
        ({"image": "a", "pull": "often"}, "container.pull: 'often' is not one of missing"),
        ({"image": "a", "network": "lan"}, "container.network: 'lan' is not one of none"),
        ({"image": "a", "env": {"A B": "1"}}, "container.env: a name is not an environment"),
        ({"image": "a", "env": {"KEY": f"{SECRET}\nmore"}}, "container.env.KEY: a value is one"),
    ],
)
def test_an_assignment_the_agent_cannot_run_fails_unstarted_naming_the_field(
    engine, container, error
):
    _, server = run(engine[0], container)
    assert finished(server)["exit_code"] is None
    assert finished(server)["error"].startswith(f"could not start: {error}")
    assert SECRET not in finished(server)["error"]
    assert fake_engine.calls(engine[1]) == []


def test_an_agent_without_an_engine_fails_a_container_assignment_unstarted():
    server, done = RecordingServer(), threading.Event()
    assignment = {"id": 9, "lease": 4, "command": "", "kind": "container", "container": {}}
    job = Job(
        assignment, client=server, session="s1", work_dir="/", on_done=lambda j: done.set(),
        on_unauthorized=lambda e: None, giving_up=threading.Event(),
    )  # fmt: skip
    job.start()
    assert done.wait(10)
    assert finished(server)["error"] == (
        "could not start: kind: this croniq-runner found no container engine at start (--engine)"
    )


# -- limits ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"max_memory": 64 * 1024 * 1024}, "max_memory: a container job's is the engine's"),
        ({"max_cpu_seconds": 2}, "max_cpu_seconds: a container job's is the engine's"),
    ],
)
def test_a_limit_of_processes_fails_a_container_run_unstarted(engine, limits, error):
    # Held on the engine's command it would hold nothing of the container.
    _, server = run(engine[0], {"image": "alpine", "args": ["true"]}, **limits)
    assert finished(server)["exit_code"] is None
    assert finished(server)["error"].startswith(f"could not start: {error}")
    assert fake_engine.calls(engine[1]) == []


def test_a_containers_output_is_kept_within_max_output(engine):
    container = {"image": "alpine", "args": ["sh", "-c", "seq 1 20000; exit 3"]}
    _, server = run(engine[0], container, max_output=4096)
    assert finished(server) == {"exit_code": 3}
    log = logged(server)
    assert len(log.encode()) <= 4096
    assert log.startswith("1\n2\n3\n") and log.endswith("19999\n20000\n")
    assert " bytes of output cut here (max_output 4 KiB)]\n" in log


def test_a_container_past_max_output_with_fail_is_ended_through_the_engine(engine):
    docker, state = engine
    # Without the limit it would write for a minute.
    script = "i=0; while [ $i -lt 600 ]; do seq 1 1000; sleep 0.1; i=$((i+1)); done"
    job, server, done = start(
        docker, {"image": "alpine", "args": ["sh", "-c", script]},
        max_output=4096, on_max_output="fail",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not done.wait(0.05):
        assert time.monotonic() < deadline, "the run did not end"
        job.tick(time.monotonic(), kill_grace=5.0)
    assert finished(server) == {"exit_code": None, "error": "output limit 4 KiB exceeded"}
    assert len(logged(server).encode()) <= 4096
    assert fake_engine.verbs(state)[1:] == [f"kill --signal TERM {NAME}", f"rm -f {NAME}"]


# -- a run ------------------------------------------------------------------------------


def test_the_output_and_exit_code_are_the_runs_and_the_container_is_removed_after(engine, tmp_path):
    docker, state = engine
    ledger = Ledger(str(tmp_path / "ledger"))
    ledger.open()
    try:
        command = (
            'echo "$GREETING from $CRONIQ_JOB, run $CRONIQ_EXECUTION_ID"; echo oops >&2; exit 3'
        )
        env = {"GREETING": "hello world", "DB_PASSWORD": SECRET}
        job, server = run(
            docker, {"image": "alpine", "args": ["sh", "-c", command], "env": env}, ledger=ledger
        )
        assert finished(server) == {"exit_code": 3}
        assert logged(server) == "hello world from render, run 9\noops\n"
        [run_call, remove] = fake_engine.calls(state)
        assert remove["argv"] == ["rm", "-f", NAME]
        assert job.removed.is_set()
        # The env reaches the engine on its standard input, never its command line.
        assert SECRET not in " ".join(run_call["argv"])
        assert run_call["env_file"].splitlines() == [
            "GREETING=hello world", f"DB_PASSWORD={SECRET}", "CRONIQ_JOB=render",
            "CRONIQ_EXECUTION_ID=9", "CRONIQ_SCHEDULED_FOR=", "CRONIQ_ATTEMPT=1",
            "CRONIQ_TRIGGER=manual",
        ]  # fmt: skip
        # Listed while it ran, no longer once removed.
        assert ledger.containers == {}
        assert (tmp_path / "ledger" / ledger.containers_name).read_text() == ""
    finally:
        ledger.close()


def test_a_secret_in_the_output_is_masked(engine):
    container = {"image": "alpine", "args": ["sh", "-c", "echo pw=$DB_PASSWORD"]}
    _, server = run(engine[0], {**container, "env": {"DB_PASSWORD": SECRET}}, redact=[SECRET])
    assert logged(server) == "pw=***\n"


def test_an_image_the_engine_cannot_run_fails_with_the_engines_own_words(engine):
    _, server = run(engine[0], {"image": "absent:1"})
    assert finished(server) == {
        "exit_code": 125,
        "error": "docker could not run the container (exit 125): "
        "docker: Error response from daemon: No such image: absent:1",
    }
    assert "No such image: absent:1" in logged(server)


# -- a run ended early -------------------------------------------------------------------


def started(state, ready):
    """The container's pid file, once it runs and its trap is set."""
    pidfile = state / f"{NAME}.pid"
    return pidfile if ready.exists() and pidfile.exists() else None


def busy(tmp_path, on_term):
    """A container that says it is ready, then waits; `on_term`: its trap."""
    ready = tmp_path / "ready"
    script = f"trap '{on_term}' TERM; touch {ready}; while :; do sleep 0.1; done"
    return {"image": "alpine", "args": ["sh", "-c", script]}, ready


def test_a_cancel_sends_sigterm_through_the_engine_and_the_container_ends_the_run(engine, tmp_path):
    docker, state = engine
    container, ready = busy(tmp_path, "echo bye; exit 7")
    job, server, done = start(docker, container)
    wait_for(lambda: started(state, ready), message="the container to start")
    job.kill("cancel", grace=30)
    assert done.wait(20)
    assert finished(server) == {"exit_code": 7, "error": "cancelled on the server's request"}
    assert logged(server) == "bye\n"
    assert fake_engine.verbs(state)[1:] == [f"kill --signal TERM {NAME}", f"rm -f {NAME}"]


def test_self_fencing_ends_the_container_the_same_way(engine, tmp_path):
    docker, state = engine
    container, ready = busy(tmp_path, "exit 143")
    job, server, done = start(docker, container)
    wait_for(lambda: started(state, ready), message="the container to start")
    assert job.give_up_lease(grace=30, report_after=time.monotonic())
    assert done.wait(20)
    assert finished(server) == {
        "exit_code": 143,
        "error": "killed by the runner: its lease could not be renewed (server unreachable)",
    }
    assert fake_engine.verbs(state)[1:] == [f"kill --signal TERM {NAME}", f"rm -f {NAME}"]


def test_a_container_ignoring_sigterm_is_killed_after_the_grace_and_removed(engine, tmp_path):
    docker, state = engine
    container, ready = busy(tmp_path, "")
    job, server, done = start(docker, container, timeout=1)
    wait_for(lambda: started(state, ready), message="the container to start")
    pid = fake_engine.container_pid(state, NAME)
    while not done.is_set():  # the agent's watchdog
        job.tick(time.monotonic(), kill_grace=0.5)
        time.sleep(0.05)
    body = finished(server)
    assert (body["exit_code"], body["timed_out"]) == (None, True)
    assert body["error"] == "timed out after 1s; terminated by SIGKILL"
    assert fake_engine.verbs(state)[1:] == [f"kill --signal TERM {NAME}", f"rm -f {NAME}"]
    assert wait_for(lambda: not fake_engine.alive(pid), message="the container to end")


def test_without_a_container_yet_the_sigterm_is_asked_again_until_there_is_one(engine, tmp_path):
    docker, state = engine
    container, ready = busy(tmp_path, "exit 7")
    job, server, done = start(docker, container)
    pidfile = wait_for(lambda: started(state, ready), message="the container to start")
    hidden = pidfile.rename(tmp_path / "hidden")  # as if its image were still pulled
    job.kill("cancel", grace=30)

    def kills():
        return [v for v in fake_engine.verbs(state) if v.startswith("kill")]

    # Counted among the kills, not among all the engine's calls: those hold
    # more than the run, and a slow machine restored the container after a
    # single kill.
    wait_for(lambda: len(kills()) >= 2, message="the SIGTERM asked twice")
    hidden.rename(pidfile)
    assert done.wait(20)
    assert finished(server) == {"exit_code": 7, "error": "cancelled on the server's request"}
    assert len(kills()) >= 3 and set(kills()) == {f"kill --signal TERM {NAME}"}


# -- the agent's death ---------------------------------------------------------------------


def test_when_the_agent_dies_the_supervisor_stops_the_container_then_removes_it(engine):
    docker, state = engine
    read, write = os.pipe()
    script = "trap 'exit 143' TERM; while :; do sleep 0.1; done"
    supervisor = subprocess.Popen(
        [sys.executable, "-I", "-S", SUPERVISOR, str(read), "1", "--container", docker.path, NAME]
        + ["--", docker.path, "run", "--name", NAME, "--env-file", "/dev/null"]
        + ["--", "alpine", "sh", "-c", script],
        pass_fds=(read,),
        start_new_session=True,
    )  # fmt: skip
    os.close(read)
    try:
        pid = wait_for(lambda: fake_engine.container_pid(state, NAME), message="the container")
        os.close(write)  # the agent is gone
        supervisor.wait(30)
        assert fake_engine.verbs(state)[1:] == [f"stop -t 1 {NAME}", f"rm -f {NAME}"]
        assert not fake_engine.alive(pid)
    finally:
        if supervisor.poll() is None:
            os.killpg(supervisor.pid, signal.SIGKILL)
            supervisor.wait()


def record_containers(state_dir, *containers, then="exit"):
    """A separate process keeps a ledger with `containers` (engine, name,
    execution id), then dies without cleaning up ("exit") or stays ("stay")."""
    code = (
        "import os, sys\n"
        "from croniq_runner.ledger import Ledger\n"
        f"ledger = Ledger({str(state_dir)!r})\n"
        "ledger.open()\n"
        f"for engine, name, eid in {list(containers)!r}:\n"
        "    ledger.add_container(engine, name, eid)\n"
        f"if {then!r} == 'exit':\n"
        "    os._exit(0)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    if then == "exit":
        process.communicate(timeout=20)
    else:
        assert process.stdout.readline() == b"ready\n"
    return process


def test_a_restart_removes_the_containers_a_dead_agent_left_but_not_a_live_ones(
    engine, tmp_path, monkeypatch
):
    _, state = engine
    monkeypatch.setenv("PATH", f"{state / 'bin'}{os.pathsep}{os.environ['PATH']}")
    state_dir = tmp_path / "agent-state"
    live = record_containers(state_dir, ("docker", "croniq-2-1-bbbbbbbb", 2), then="stay")
    try:
        record_containers(state_dir, ("docker", "croniq-1-1-aaaaaaaa", 1))
        # A list whose ledger is gone belongs to no agent either.
        (state_dir / "jobs-999999999.containers").write_text("docker croniq-3-2-cccccccc 3\n")
        ledger = Ledger(str(state_dir))
        ledger.open()
        ledger.close()
        assert sorted(fake_engine.verbs(state)) == [
            "rm -f croniq-1-1-aaaaaaaa", "rm -f croniq-3-2-cccccccc",
        ]  # fmt: skip
        assert [p.name for p in state_dir.glob("*.containers")] == [f"jobs-{live.pid}.containers"]
    finally:
        live.communicate(timeout=20)


# -- finding the engine ----------------------------------------------------------------------


def test_auto_takes_the_first_engine_that_answers(tmp_path, monkeypatch):
    bin_dir = fake_engine.install(tmp_path, ("docker", "podman"))
    monkeypatch.setenv("PATH", str(bin_dir))
    found = engines.detect("auto")
    assert found == Engine("docker", str(bin_dir / "docker"))
    (bin_dir / "docker").unlink()
    assert engines.detect("auto") == Engine("podman", str(bin_dir / "podman"))
    assert engines.detect("none") is None


def test_auto_without_an_answering_engine_runs_no_container_jobs(tmp_path, monkeypatch, caplog):
    bin_dir = fake_engine.install(tmp_path, ("docker",))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_ENGINE_VERSION_EXIT", "1")
    assert engines.detect("auto") is None
    assert "no container engine answered (docker: `docker version` failed" in caplog.text
    assert "podman: not installed" in caplog.text


def test_an_engine_named_that_does_not_answer_stops_the_agent(tmp_path, monkeypatch):
    bin_dir = fake_engine.install(tmp_path, ("podman",))
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_ENGINE_VERSION_SLEEP", "10")
    with pytest.raises(EngineMissing, match=r"--engine podman: `podman version` did not answer"):
        engines.detect("podman", timeout=0.5)
    agent = Agent(Config(server="http://croniq.test", token="t", name="n", engine="docker"))
    with pytest.raises(Fatal) as stopped:
        agent.find_engine()
    assert stopped.value.code == EXIT_USAGE
    assert str(stopped.value) == "--engine docker: not installed"


def test_engine_comes_from_the_flag_or_the_environment_auto_by_default(tmp_path):
    base = ["--server", "http://croniq.test", "--token", "t", "--work-dir", str(tmp_path)]
    assert parse_args(base, environ={}).engine == "auto"
    assert parse_args(base, environ={"CRONIQ_ENGINE": "Podman"}).engine == "podman"
    assert parse_args([*base, "--engine", "none"], environ={"CRONIQ_ENGINE": "docker"}).engine == (
        "none"
    )
    with pytest.raises(UsageError, match="CRONIQ_ENGINE: expected one of docker, podman, auto"):
        parse_args(base, environ={"CRONIQ_ENGINE": "lxc"})


def test_with_an_engine_the_runner_carries_the_label_and_announces_container():
    config = Config(server="http://croniq.test", token="t", name="n", labels=["linux"])
    agent = Agent(config)
    assert (agent.registration()["labels"], agent.registration()["features"]) == (
        ["linux"],
        ["stdin", "http", "limits"],
    )
    agent.engine = Engine("docker", "/usr/bin/docker")
    assert (agent.registration()["labels"], agent.registration()["features"]) == (
        ["linux", "container"],
        ["stdin", "http", "container", "limits"],
    )
    labelled = Agent(Config(server="http://croniq.test", token="t", name="n", labels=["container"]))
    labelled.engine = agent.engine
    assert labelled.registration()["labels"] == ["container"]


def test_the_agent_hands_a_container_assignment_to_a_container_job(engine, monkeypatch):
    """With an engine, ContainerJob runs it; without one, Job, which fails it
    unstarted (above)."""
    started = []
    monkeypatch.setattr(Job, "start", lambda job: started.append(type(job)))
    monkeypatch.setattr(ContainerJob, "start", lambda job: started.append(type(job)))
    agent = Agent(Config(server="http://croniq.test", token="t", name="n", work_dir="/"))
    agent.leases = LeaseBook(30.0)
    container = {"image": "alpine", "args": ["true"], "pull": "never"}
    for job_id, found in ((5, None), (6, engine[0])):
        agent.engine = found
        assignment = {"id": job_id, "lease": 1, "command": "", "kind": "container"}
        agent.accept({**assignment, "container": container}, time.monotonic())
    assert started == [Job, ContainerJob]
    assert agent.jobs[6].engine == engine[0]
