"""A job's `stdin` and `run_as` on the agent (docs/design.md §4, §13): the
input reaches the command's standard input, and the command runs as the
job's user or not at all. Which users a job may name is the operator's
choice (--allow-run-as): tests/agent/test_allow_run_as.py."""

import os
import pwd

import pytest

from croniq_runner import job as job_module
from croniq_runner.agent import Agent
from croniq_runner.config import Account, Config
from croniq_runner.job import FEATURES, RunAsError, job_account
from tests.agent.test_allow_run_as import run_allowed
from tests.agent.test_job import RecordingServer, run_job

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")


def output(server):
    return "".join(body["data"] for body in server.bodies("logs"))


def test_the_agent_announces_the_assignment_fields_it_acts_on():
    assert FEATURES == ("stdin", "run_as", "http", "container", "limits")


def test_the_command_reads_the_jobs_stdin_then_end_of_input(tmp_path):
    server = RecordingServer()
    run_job("cat; echo '<end>'", server, tmp_path, stdin="first line\n100% done\n")
    assert output(server) == "first line\n100% done\n<end>\n"
    [finish] = server.bodies("finish")
    assert finish["exit_code"] == 0


def test_without_stdin_the_command_reads_nothing(tmp_path):
    server = RecordingServer()
    run_job("cat; echo '<end>'", server, tmp_path)
    assert output(server) == "<end>\n"


def test_a_command_that_ignores_a_large_stdin_still_ends_well(tmp_path):
    server = RecordingServer()
    run_job("echo ignored", server, tmp_path, stdin="x" * 65536 * 4)
    assert output(server) == "ignored\n"
    [finish] = server.bodies("finish")
    assert finish["exit_code"] == 0


@as_root
def test_the_command_runs_as_the_jobs_user(tmp_path):
    server = RecordingServer()
    run_allowed("id -un; echo $HOME $USER", server, tmp_path, ["nobody"], run_as="nobody")
    home = pwd.getpwnam("nobody").pw_dir
    assert output(server) == f"nobody\n{home} nobody\n"


@as_root
def test_an_allowed_jobs_user_wins_over_the_agents_run_as(tmp_path):
    daemon = pwd.getpwnam("daemon")
    agents = Account("daemon", daemon.pw_uid, daemon.pw_gid, (daemon.pw_gid,), daemon.pw_dir)
    assert job_account({"run_as": "nobody"}, agents, ["nobody"]).name == "nobody"
    assert job_account({}, agents, ["nobody"]) is agents
    assert job_account({"run_as": ""}, agents, ["nobody"]) is agents


def test_an_unknown_user_fails_the_run_without_starting_it(tmp_path):
    server = RecordingServer()
    marker = tmp_path / "ran"
    # Allowed when the agent started, gone from the machine since.
    run_allowed(
        f"touch {marker}", server, tmp_path, ["no-such-user-here"], run_as="no-such-user-here"
    )
    assert not marker.exists()
    [finish] = server.bodies("finish")
    assert finish == {
        "session": "s1",
        "lease": 4,
        "exit_code": None,
        "error": "could not start: run_as: no such user 'no-such-user-here' on this machine",
    }


def test_an_agent_that_is_not_root_fails_a_run_as_another_user(tmp_path, monkeypatch):
    monkeypatch.setattr(job_module.os, "geteuid", lambda: 4242)
    server = RecordingServer()
    marker = tmp_path / "ran"
    run_allowed(f"touch {marker}", server, tmp_path, ["nobody"], run_as="nobody")
    assert not marker.exists()
    [finish] = server.bodies("finish")
    assert finish["error"] == (
        "could not start: run_as: running jobs as 'nobody' needs the agent to run as root "
        "(it runs as uid 4242)"
    )


def test_the_agents_own_user_needs_no_switch(monkeypatch):
    nobody = pwd.getpwnam("nobody")
    monkeypatch.setattr(job_module.os, "geteuid", lambda: nobody.pw_uid)
    assert job_account({"run_as": "nobody"}, None, ["nobody"]) is None


def test_a_run_as_that_is_not_text_is_refused():
    with pytest.raises(RunAsError, match="run_as: 1000 is not a user name"):
        job_account({"run_as": 1000}, None, ["1000"])


def test_the_registration_announces_them_to_the_server():
    config = Config(server="http://croniq.test", token="t", name="n", allow_run_as=("nobody",))
    body = Agent(config).registration()
    assert body["features"] == ["stdin", "run_as", "http", "limits"]
    assert body["name"] == "n"
