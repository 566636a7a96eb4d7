"""`croniq`, the management CLI, as an operator runs it: installed from the
runner's wheel (harness/runner_venv.py), against a real server, with a real
agent running what it triggers.

The tests of this module share one server, one database and one agent;
each works on jobs of its own, created by the first test's `croniq apply`.
"""

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from harness.processes import (
    Server,
    drop_database,
    free_port,
    manage,
    migrated_database,
    start_agent,
    wait_for,
)
from harness.runner_venv import bare_env, runner_venv
from tests.agent.world import issue_token, ready
from tests.e2e.protocol_client import RunnerClient

pytestmark = pytest.mark.e2e

APPLY_FILE = """\
# Jobs for the CLI's tests; only the agent labelled "cli" runs them.
jobs:
  - name: greet
    schedule: "*/5 * * * *"
    command: echo hello
    labels: [cli]
  - name: countdown
    schedule: "0 0 1 1 *"
    command: "for i in 1 2 3 4 5; do echo line $i; sleep 0.4; done; exit 3"
    labels: [cli]
    retries: 0
  - name: sleeper
    schedule: "0 0 1 1 *"
    command: sleep 60
    labels: [cli]
"""


def api_key(db, name, *scopes):
    return manage(db, "create_api_key", name, "--scopes", *scopes).stdout.strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli-world")
    db = migrated_database(tmp)
    try:
        server = Server(db, tmp / "web.log", CRONIQ_HEARTBEAT_INTERVAL=0.5)
        try:
            # While the server boots.
            token = issue_token(db)
            admin = api_key(db, "cli-admin", "admin")
            reader = api_key(db, "cli-reader", "jobs:read")
            ready(server)
            agent = start_agent(
                server.url, token, tmp / "agent.log", "--name", "cli-agent", "--labels", "cli",
                "--poll-wait", "5", "--kill-grace", "1",
            )  # fmt: skip
            try:
                yield SimpleNamespace(
                    db=db, server=server, token=token, admin=admin, reader=reader, tmp=tmp
                )
            finally:
                agent.stop()
        finally:
            server.stop()
    finally:
        drop_database(db)


@pytest.fixture(scope="module")
def croniq(world):
    """Run the installed `croniq ARGS` with the admin key in CRONIQ_API_KEY."""

    def run(*args, key=None, server=None, timeout=60):
        env = bare_env() | {
            "CRONIQ_SERVER": server or world.server.url,
            "CRONIQ_API_KEY": key or world.admin,
        }
        return subprocess.run(
            [str(runner_venv() / "croniq"), *args],
            cwd=world.tmp,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    return run


@pytest.fixture(scope="module")
def applied(world, croniq):
    path = world.tmp / "croniq.yaml"
    path.write_text(APPLY_FILE)
    planned = croniq("apply", str(path), "--dry-run")
    before = croniq("jobs", "list", "--json")
    done = croniq("apply", str(path))
    again = croniq("apply", str(path))
    return SimpleNamespace(planned=planned, before=before, done=done, again=again)


def ok(result):
    assert result.returncode == 0, f"{result.args}: {result.returncode}\n{result.stderr}"
    return result.stdout


def as_json(result):
    return json.loads(ok(result))


def execution(croniq, execution_id):
    return as_json(croniq("executions", "show", str(execution_id), "--json"))


def test_apply_prints_the_plan_then_applies_it_once(applied):
    assert ok(applied.planned).splitlines() == [
        "+ job greet",
        "+ job countdown",
        "+ job sleeper",
        "would apply 3 change(s)",
    ]
    assert json.loads(ok(applied.before)) == {"items": [], "next_cursor": None}
    assert ok(applied.done).splitlines()[-1] == "applied 3 change(s)"
    assert ok(applied.again) == "nothing to change: everything is as the file says\n"


def test_jobs_are_listed_shown_and_their_next_instants_told(applied, croniq):
    table = ok(croniq("jobs", "list")).splitlines()
    shown = ok(croniq("jobs", "show", "greet"))
    instants = ok(croniq("jobs", "next", "greet", "--count", "3")).splitlines()
    page = as_json(croniq("jobs", "list", "--limit", "2", "--json"))

    assert table[0].split()[:3] == ["NAME", "PROJECT", "SCHEDULE"]
    assert sorted(line.split()[0] for line in table[1:]) == ["countdown", "greet", "sleeper"]
    assert re.search(r"^command: +echo hello$", shown, re.M)
    assert re.search(r"^managed_by: +apply$", shown, re.M)
    times = [datetime.fromisoformat(instant) for instant in instants]
    assert [b - a for a, b in zip(times, times[1:], strict=False)] == [timedelta(minutes=5)] * 2
    assert len(page["items"]) == 2 and page["next_cursor"]


def test_a_job_is_paused_and_resumed(applied, croniq):
    paused = ok(croniq("jobs", "pause", "greet", "--reason", "maintenance"))
    while_paused = as_json(croniq("jobs", "show", "greet", "--json"))
    resumed = ok(croniq("jobs", "resume", "greet"))

    assert paused == "job greet: paused\n"
    assert (while_paused["paused"], while_paused["pause_reason"]) == (True, "maintenance")
    assert resumed.startswith("job greet: resumed, next run ")
    assert as_json(croniq("jobs", "show", "greet", "--json"))["paused"] is False


def test_logs_follow_prints_the_run_as_it_goes_and_exits_with_its_code(applied, croniq):
    triggered = as_json(croniq("jobs", "trigger", "countdown", "--json"))
    execution_id = triggered["execution_id"]

    followed = croniq("executions", "logs", str(execution_id), "--follow")

    assert followed.returncode == 3, followed.stderr
    assert followed.stdout == "".join(f"line {i}\n" for i in range(1, 6))
    assert execution(croniq, execution_id)["exit_code"] == 3
    assert ok(croniq("executions", "logs", str(execution_id))) == followed.stdout
    listed = ok(croniq("executions", "list", "--job", "countdown")).splitlines()
    assert listed[1].split()[:3] == [str(execution_id), "countdown", "failed"]


def test_a_finished_execution_is_retried_and_a_running_one_cancelled(applied, croniq):
    [failed] = as_json(croniq("executions", "list", "--job", "countdown", "--json"))["items"]
    retried = ok(croniq("executions", "retry", str(failed["id"])))
    sleeper = as_json(croniq("jobs", "trigger", "sleeper", "--json"))["execution_id"]
    wait_for(lambda: execution(croniq, sleeper)["state"] == "running", message="sleeper runs")

    cancelled = ok(croniq("executions", "cancel", str(sleeper)))

    # The answer says the retry's state when it was read: a waiting agent
    # may have claimed it already.
    assert re.match(r"execution \d+: attempt 2 of job countdown, (pending|running)$", retried)
    assert cancelled == f"execution {sleeper}: cancel requested, the runner stops it\n"
    wait_for(
        lambda: execution(croniq, sleeper)["state"] == "cancelled",
        timeout=30,
        message="the agent stops the cancelled run",
    )


def test_a_backfill_dry_run_shows_the_instants_it_would_run(applied, croniq):
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = now - timedelta(hours=2), now - timedelta(hours=1, minutes=40)

    shown = croniq(
        "jobs", "backfill", "greet", "--start", start.isoformat(), "--end", end.isoformat(),
        "--dry-run",
    )  # fmt: skip

    *instants, summary = ok(shown).splitlines()
    assert len(instants) >= 4
    assert summary == f"would create {len(instants)} execution(s)"


def test_runners_are_listed_and_one_drained(world, croniq):
    spare = RunnerClient(world.server.url, world.token, name="cli-spare")
    spare.register()

    table = ok(croniq("runners", "list"))
    drained = ok(croniq("runners", "drain", str(spare.runner_id)))

    assert "cli-agent" in table and "cli-spare" in table
    assert drained == f"runner cli-spare ({spare.runner_id}): drained, it takes no new work\n"
    runners = as_json(croniq("runners", "list", "--json"))["items"]
    assert {r["name"]: r["drained"] for r in runners} == {"cli-agent": False, "cli-spare": True}


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["jobs", "show", "no-such-job"], 404),
        (["jobs", "next", "greet", "--count", "1000"], 422),
        (["jobs", "trigger", "greet", "--env", "UNDECLARED=1"], 422),
        (["jobs", "trigger", "greet", "--scheduled-for", "yesterday"], 422),
        (["executions", "cancel", "__failed__"], 409),
    ],
)
def test_a_refused_call_exits_1_with_the_apis_detail(applied, croniq, args, status):
    if "__failed__" in args:
        failed = as_json(croniq("executions", "list", "--state", "failed", "--json"))["items"]
        args = [*args[:-1], str(failed[0]["id"])]

    refused = croniq(*args)

    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith(f"croniq: HTTP {status}: ")
    assert refused.stdout == ""


def test_bad_usage_exits_2(world, croniq):
    unknown = croniq("jobs", "frobnicate")
    no_server = croniq("jobs", "list", server="croniq.example")

    assert unknown.returncode == no_server.returncode == 2
    assert "invalid choice: 'frobnicate'" in unknown.stderr
    assert "http:// or https://" in no_server.stderr


def test_a_wrong_key_and_a_missing_scope_exit_3(world, croniq):
    wrong = croniq("jobs", "list", key="crk_not-a-key")
    unscoped = croniq("jobs", "trigger", "greet", key=world.reader)

    assert (wrong.returncode, unscoped.returncode) == (3, 3)
    assert wrong.stderr.startswith("croniq: HTTP 401: ")
    assert unscoped.stderr == "croniq: HTTP 403: needs scope jobs:trigger\n"


def test_a_server_that_is_not_listening_exits_4(croniq):
    url = f"http://127.0.0.1:{free_port()}"

    unreachable = croniq("jobs", "list", server=url)

    assert unreachable.returncode == 4
    assert unreachable.stderr == f"croniq: cannot reach {url}: Connection refused\n"
