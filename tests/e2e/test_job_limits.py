"""A job's limits through real processes (docs/design.md §15): written with
the management API, claimed by a real croniq-runner, held on its command,
and each run past one failed with an error naming it; its exit codes
settled by the server. Memory and CPU both ways the agent holds them: in a
cgroup where this machine lets it make one, and by setrlimit (--cgroups
off). The previous release's agent, which knows no limits, never gets a
job it would run unbounded, and the server cuts the log of one it gets."""

import re
import sys

import pytest

from croniq_runner.cgroups import Cgroups
from harness.previous_release import start_previous_agent
from harness.processes import (
    Server,
    drop_database,
    manage,
    migrated_database,
    start_agent,
    wait_for,
)
from tests.agent.world import ready
from tests.e2e.test_upgrade_mixed_versions import (  # noqa: F401 - the fixture is autouse
    SERVER_ENV,
    Api,
    credentials,
    previous_release_built,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc, cgroups"),
]

NEVER = "0 0 1 1 *"  # a schedule that never comes during the test: triggers run the jobs
PYTHON = sys.executable
HOLD = "import time; x = bytearray({mib} * 1024 * 1024); print('held', flush=True); time.sleep(60)"
BURN = (
    "import time\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\n"
    "print('burnt', flush=True)\ntime.sleep(60)"
)
CGROUPS = Cgroups.probe()
HOLDING = pytest.mark.parametrize(
    "holding",
    [
        pytest.param(("--cgroups", "off"), id="setrlimit"),
        pytest.param(
            (),
            id="cgroup",
            marks=pytest.mark.skipif(CGROUPS.memory is None, reason="no memory cgroup here"),
        ),
    ],
)


def python(code):
    return f'{PYTHON} -c "{code}"'


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    folder = tmp_path_factory.mktemp("job-limits")
    db = migrated_database(folder)
    server = Server(db, folder / "web.log", **SERVER_ENV)
    try:
        token, key = credentials(manage, db)
        yield {"db": db, "server": ready(server), "token": token, "api": Api(server.url, key)}
    finally:
        server.stop()
        drop_database(db)


@pytest.fixture
def agent(world, tmp_path, request):
    """Starts agents labelled after the test; stopped, their logs shown, at the end."""
    label = re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:60]
    started = []

    def start(*args, previous=False):
        argv = ["--name", f"{label}-{len(started)}", "--labels", label, "--poll-wait", "1", *args]
        launch = start_previous_agent if previous else start_agent
        log = tmp_path / f"agent-{len(started)}.log"
        started.append(launch(world["server"].url, world["token"], log, *argv))
        return started[-1]

    start.label = label
    yield start
    for process in started:
        process.stop()
        print(f"--- {process.log_path}\n{process.output()}")


def triggered(world, label, name, **fields):
    """The execution id of a run of job `name` (made with `fields`)."""
    api = world["api"]
    job = {"name": f"{label}-{name}"[:100], "schedule": NEVER, "labels": [label], **fields}
    api.call("POST", "jobs", json=job)
    return api.call("POST", f"jobs/{job['name']}/trigger")["execution_id"]


def ended(world, execution_id, timeout=60):
    """The run once it has ended (its log too), waited for."""
    api = world["api"]
    run = wait_for(
        lambda: (
            (found := api.call("GET", f"executions/{execution_id}"))["state"]
            not in ("pending", "running")
            and found
        ),
        timeout=timeout,
        message=f"execution {execution_id} to end",
    )
    run["log"] = api.call("GET", f"executions/{execution_id}/log")["data"]
    return run


def outcome(run):
    return run["state"], run["exit_code"], run["error"] or None


def test_a_log_past_max_output_keeps_its_head_and_tail_or_fails_the_run(world, agent):
    kept = triggered(world, agent.label, "chatty", command="seq 1 100000", max_output="16KiB")
    endless = "while :; do seq 1 1000; sleep 0.1; done"
    failing = triggered(
        world, agent.label, "endless", command=endless, max_output="16KiB", on_max_output="fail"
    )
    agent("--capacity", "2")
    run = ended(world, kept)
    assert outcome(run) == ("succeeded", 0, None)
    assert len(run["log"].encode()) <= 16 * 1024
    assert run["log"].startswith("1\n2\n3\n") and run["log"].endswith("99999\n100000\n")
    assert " bytes of output cut here (max_output 16 KiB)]\n" in run["log"]
    run = ended(world, failing)
    assert outcome(run) == ("failed", None, "output limit 16 KiB exceeded")
    assert len(run["log"].encode()) <= 16 * 1024


@HOLDING
def test_memory_past_max_memory_fails_the_run(world, agent, holding):
    over = triggered(world, agent.label, "over", command=python(HOLD.format(mib=200)),
                     max_memory="64MiB")  # fmt: skip
    fits = python("x = bytearray(8 * 1024 * 1024); print(len(x))")
    within = triggered(world, agent.label, "within", command=fits, max_memory="64MiB")
    agent(*holding, "--capacity", "2")
    assert outcome(ended(world, over)) == ("failed", None, "memory limit 64 MiB exceeded")
    assert outcome(ended(world, within)) == ("succeeded", 0, None)


@pytest.mark.skipif(CGROUPS.memory is None, reason="no memory cgroup here")
def test_in_a_cgroup_the_memory_of_all_the_runs_processes_counts(world, agent):
    # Each fits the limit and would hold its memory for a minute; together they do not fit.
    one = python(HOLD.format(mib=30))
    many = triggered(world, agent.label, "many", command=f"{one} & {one} & {one} & wait",
                     max_memory="64MiB")  # fmt: skip
    agent()
    assert outcome(ended(world, many)) == ("failed", None, "memory limit 64 MiB exceeded")


@pytest.mark.parametrize(
    "holding",
    [
        pytest.param(("--cgroups", "off"), id="process-tree"),
        pytest.param(
            (),
            id="cgroup",
            marks=pytest.mark.skipif(CGROUPS.cpu is None, reason="no CPU cgroup here"),
        ),
    ],
)
def test_cpu_past_max_cpu_seconds_fails_the_run(world, agent, holding):
    # Each burns less than the limit, then waits a minute; together they pass it.
    one = python(BURN.format(seconds=0.8))
    tree = triggered(world, agent.label, "tree", command=f"{one} & {one} & {one} & wait",
                     max_cpu_seconds=2)  # fmt: skip
    alone = triggered(world, agent.label, "alone", command=python(BURN.format(seconds=30)),
                      max_cpu_seconds=1)  # fmt: skip
    agent(*holding, "--capacity", "2")
    assert outcome(ended(world, tree)) == ("failed", None, "CPU limit 2 s exceeded")
    assert outcome(ended(world, alone)) == ("failed", None, "CPU limit 1 s exceeded")


def test_the_exit_codes_a_job_lists_succeed(world, agent):
    three = triggered(world, agent.label, "three", command="exit 3", success_exit_codes=[0, 3])
    four = triggered(world, agent.label, "four", command="exit 4", success_exit_codes=[0, 3])
    only = triggered(world, agent.label, "only", command="true", success_exit_codes=[3])
    agent("--capacity", "3")
    assert outcome(ended(world, three)) == ("succeeded", 3, None)
    assert outcome(ended(world, four)) == ("failed", 4, None)
    assert outcome(ended(world, only)) == ("failed", 0, None)


def test_the_previous_agent_gets_no_job_it_would_run_unbounded(world, agent):
    cut = triggered(world, agent.label, "cut", command="seq 1 100000", max_output="4KiB")
    bounded = triggered(world, agent.label, "bounded", command="echo bounded",
                        max_memory="64MiB", max_cpu_seconds=5)  # fmt: skip
    agent("--capacity", "2", previous=True)
    # The previous agent knows no max_output: the server keeps the log's head.
    run = ended(world, cut)
    assert outcome(run) == ("succeeded", 0, None)
    assert run["log"].startswith("1\n2\n3\n")
    assert run["log"].endswith("\n[croniq: log truncated at 4096 bytes]\n")
    assert len(run["log"].encode()) <= 4096 + 64
    # Both were ready at its first poll, which had room for both: had the
    # bounded job been handed to it, it would have run unbounded.
    api = world["api"]
    assert api.call("GET", f"executions/{bounded}")["state"] == "pending"
    agent()
    assert outcome(ended(world, bounded)) == ("succeeded", 0, None)
    assert api.call("GET", f"executions/{bounded}")["runner"] == f"{agent.label}-1"
