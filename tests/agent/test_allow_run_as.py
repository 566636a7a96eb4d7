"""--allow-run-as (docs/design.md §4, §5): the machine's operator, not whoever
writes jobs, decides which users a job's `run_as` may name. A job naming
another user never starts: its run fails saying which user and which
option. A job without `run_as` runs as before (the agent's --run-as, else
the agent's user). The agent announces run_as at registration only when it
allows a user, so the server keeps such jobs for agents that may run them.

The tests run as root here: a job the agent refused would otherwise run as
root, and a marker file shows whether the command ran.
"""

import os
import pwd
import re
import threading
import time

import pytest

from croniq_runner import agent as agent_module
from croniq_runner import config as config_module
from croniq_runner.agent import EXIT_USAGE, Agent, main
from croniq_runner.config import Account, Config, SetupError, UsageError, parse_args
from croniq_runner.job import Job, RunAsError, announced_features, job_account
from croniq_runner.timing import LeaseBook
from tests.agent.test_job import RecordingServer

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
BASE = ["--server", "http://croniq.test", "--token", "crq_secret"]
NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = Account("nobody", NOBODY.pw_uid, NOBODY.pw_gid, (NOBODY.pw_gid,), NOBODY.pw_dir)


def run_allowed(command, server, work_dir, allowed, account=None, timeout=10, **assignment):
    """Run one job as an agent with --allow-run-as `allowed` (and --run-as
    `account`) would; returns it once its end is reported."""
    done = threading.Event()
    job = Job(
        {"id": 9, "lease": 4, "command": command, "job": "j", "attempt": 1, **assignment},
        client=server,
        session="s1",
        work_dir=str(work_dir),
        on_done=lambda job: done.set(),
        on_unauthorized=lambda error: None,
        giving_up=threading.Event(),
        account=account,
        allowed_users=tuple(allowed),
    )
    job.start()
    assert done.wait(timeout), "the job did not end"
    return job


def output(server):
    return "".join(body["data"] for body in server.bodies("logs"))


# -- the agent running a job ----------------------------------------------------


def test_an_agent_allowing_no_user_refuses_a_run_as_root_job_without_running_it(tmp_path):
    server = RecordingServer()
    marker = tmp_path / "ran"
    # As --run-as nobody: before --allow-run-as the job's run_as won and this ran as root.
    run_allowed(f"touch {marker}", server, tmp_path, [], account=AS_NOBODY, run_as="root")
    assert not marker.exists()
    assert server.bodies("logs") == []
    [finish] = server.bodies("finish")
    assert finish == {
        "session": "s1",
        "lease": 4,
        "exit_code": None,
        "error": "could not start: run_as: user 'root' is not allowed on this runner "
        "(croniq-runner --allow-run-as)",
    }


def test_a_user_missing_from_the_list_is_refused_though_others_are_allowed(tmp_path):
    server = RecordingServer()
    marker = tmp_path / "ran"
    run_allowed(f"touch {marker}", server, tmp_path, ["nobody", "daemon"], run_as="root")
    assert not marker.exists()
    [finish] = server.bodies("finish")
    assert finish["error"] == (
        "could not start: run_as: user 'root' is not allowed on this runner "
        "(croniq-runner --allow-run-as)"
    )


def test_the_list_holds_names_exactly_no_patterns_no_case_folding(tmp_path):
    for name in ("NOBODY", "nobody ", "*", "nob"):
        with pytest.raises(RunAsError, match="is not allowed on this runner"):
            job_account({"run_as": name}, None, ["nobody"])


@as_root
def test_an_allowed_user_runs_the_command(tmp_path):
    server = RecordingServer()
    run_allowed("id -un; echo $HOME", server, tmp_path, ["nobody"], run_as="nobody")
    assert output(server) == f"nobody\n{NOBODY.pw_dir}\n"
    [finish] = server.bodies("finish")
    assert finish["exit_code"] == 0


@as_root
def test_a_job_without_run_as_still_runs_as_the_agents_run_as(tmp_path):
    server = RecordingServer()
    # root allowed for the jobs that name it; this one names no user.
    run_allowed("id -un", server, tmp_path, ["root"], account=AS_NOBODY)
    assert output(server) == "nobody\n"
    assert job_account({}, AS_NOBODY, ()) is AS_NOBODY


def test_the_agent_hands_its_list_to_each_job(monkeypatch):
    made = []

    class Recorded:
        def __init__(self, assignment, **options):
            self.id = assignment["id"]
            made.append(options)

        def start(self):
            pass

    monkeypatch.setattr(agent_module, "Job", Recorded)
    config = Config(server="http://croniq.test", token="t", name="n", allow_run_as=("nobody",))
    agent = Agent(config, clock=time.monotonic)
    agent.leases = LeaseBook(30.0, clock=time.monotonic)
    agent.accept({"id": 7, "lease": 1, "command": "true", "run_as": "root"}, time.monotonic())
    assert made[0]["allowed_users"] == ("nobody",)


# -- registration ---------------------------------------------------------------


def test_without_a_list_the_agent_announces_stdin_but_not_run_as():
    agent = Agent(Config(server="http://croniq.test", token="t", name="n"))
    assert agent.registration()["features"] == ["stdin", "http", "limits"]
    assert announced_features(()) == ["stdin", "http", "limits"]


def test_with_a_list_the_agent_announces_run_as_too():
    config = Config(server="http://croniq.test", token="t", name="n", allow_run_as=("nobody",))
    assert Agent(config).registration()["features"] == ["stdin", "run_as", "http", "limits"]


# -- configuration --------------------------------------------------------------


def test_no_list_by_default():
    assert parse_args(BASE, environ={}).allow_run_as == ()
    assert parse_args([*BASE, "--allow-run-as", " "], environ={}).allow_run_as == ()


@as_root
def test_the_flag_and_its_variable_give_the_list_in_order_without_repeats():
    config = parse_args([*BASE, "--allow-run-as", " nobody, root,nobody"], environ={})
    assert config.allow_run_as == ("nobody", "root")
    environ = {"CRONIQ_ALLOW_RUN_AS": "root"}
    assert parse_args(BASE, environ=environ).allow_run_as == ("root",)
    flag = parse_args([*BASE, "--allow-run-as", "nobody"], environ=environ)
    assert flag.allow_run_as == ("nobody",)


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (
            ["--allow-run-as", "nobody,,root"],
            {},
            "--allow-run-as: an empty user name in 'nobody,,root' (USER[,USER...])",
        ),
        (
            [],
            {"CRONIQ_ALLOW_RUN_AS": "nobody,"},
            "CRONIQ_ALLOW_RUN_AS: an empty user name in 'nobody,' (USER[,USER...])",
        ),
        (
            ["--allow-run-as", "*"],
            {},
            "--allow-run-as: '*' is not supported: name each user jobs may run as",
        ),
        (["--allow-run-as", "nobody,ro ot"], {}, "--allow-run-as: 'ro ot' is not a user name"),
        (["--allow-run-as=-root"], {}, "--allow-run-as: '-root' is not a user name"),
        (["--allow-run-as", "0"], {}, "--allow-run-as: '0' is not a user name"),
        (["--allow-run-as", "a" * 33], {}, f"--allow-run-as: '{'a' * 33}' is not a user name"),
        ([], {"CRONIQ_ALLOW_RUN_AS": "r*t"}, "CRONIQ_ALLOW_RUN_AS: 'r*t' is not a user name"),
    ],
)
def test_malformed_lists_are_refused_naming_the_option(argv, environ, message):
    with pytest.raises(UsageError, match=re.escape(message)) as raised:
        parse_args([*BASE, *argv], environ=environ)
    assert not isinstance(raised.value, SetupError)  # these print the usage line too


def test_an_unknown_user_in_the_list_is_refused_in_one_line(capsys):
    assert main([*BASE, "--allow-run-as", "nobody,no-such-user-here"]) == EXIT_USAGE
    assert capsys.readouterr().err == (
        "croniq-runner: error: --allow-run-as: no such user 'no-such-user-here'\n"
    )


def test_another_user_without_root_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(config_module.os, "geteuid", lambda: NOBODY.pw_uid)
    with pytest.raises(SetupError, match="--allow-run-as: running jobs as 'root' needs the agent"):
        parse_args([*BASE, "--allow-run-as", "root"], environ={})
    # Its own user it may allow: that runs with no switch.
    assert parse_args([*BASE, "--allow-run-as", "nobody"], environ={}).allow_run_as == ("nobody",)


def test_help_names_the_option_and_its_variable(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--allow-run-as" in out
    assert "CRONIQ_ALLOW_RUN_AS" in out
