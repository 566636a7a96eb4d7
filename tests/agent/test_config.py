import os
import pwd
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from croniq_runner.agent import EXIT_USAGE, main
from croniq_runner.config import UsageError, parse_args, parse_labels

BASE = ["--server", "http://croniq.test", "--token", "crq_secret"]


def test_flags_give_the_whole_configuration(tmp_path):
    config = parse_args(
        [
            *BASE,
            "--name",
            "build-7",
            "--labels",
            "linux, gpu",
            "--capacity",
            "4",
            "--work-dir",
            str(tmp_path),
            "--log-level",
            "debug",
            "--once",
            "--drain-timeout",
            "5",
            "--poll-wait",
            "3",
        ],
        environ={},
    )
    assert config.server == "http://croniq.test"
    assert config.token == "crq_secret"
    assert config.name == "build-7"
    assert config.labels == ["linux", "gpu"]
    assert config.capacity == 4
    assert config.work_dir == str(tmp_path)
    assert config.log_level == "DEBUG"
    assert config.once is True
    assert config.drain_timeout == 5.0
    assert config.poll_wait == 3.0


def test_environment_fills_in_what_flags_leave_out(tmp_path):
    environ = {
        "CRONIQ_SERVER": "https://croniq.example/",
        "CRONIQ_TOKEN": "crq_from_env",
        "CRONIQ_RUNNER_NAME": "env-runner",
        "CRONIQ_LABELS": "a,b",
        "CRONIQ_CAPACITY": "3",
        "CRONIQ_WORK_DIR": str(tmp_path),
    }
    config = parse_args([], environ=environ)
    assert config.server == "https://croniq.example"
    assert config.token == "crq_from_env"
    assert (config.name, config.labels, config.capacity) == ("env-runner", ["a", "b"], 3)
    assert config.work_dir == str(tmp_path)


def test_a_flag_wins_over_its_environment_variable():
    environ = {"CRONIQ_SERVER": "http://env", "CRONIQ_TOKEN": "t", "CRONIQ_CAPACITY": "9"}
    config = parse_args(["--server", "http://flag", "--capacity", "2"], environ=environ)
    assert (config.server, config.capacity) == ("http://flag", 2)


def test_defaults_are_hostname_no_labels_one_slot_and_the_current_directory(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    config = parse_args(BASE, environ={})
    assert config.name == socket.gethostname()
    assert config.labels == []
    assert config.capacity == 1
    assert config.work_dir == str(tmp_path)
    assert config.once is False
    assert config.drain_timeout == 60.0


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--token", "t"], {}, "no server"),
        (["--server", "http://x"], {}, "no token"),
        (["--server", "croniq.test", "--token", "t"], {}, "http:// or https://"),
        ([*BASE, "--capacity", "0"], {}, "--capacity: must be between 1 and 1000"),
        ([*BASE, "--capacity", "1001"], {}, "--capacity: must be between 1 and 1000"),
        ([*BASE], {"CRONIQ_CAPACITY": "many"}, "CRONIQ_CAPACITY: expected a number"),
        ([*BASE, "--poll-wait", "61"], {}, "--poll-wait: must be between 0 and 60"),
        ([*BASE, "--work-dir", "/nonexistent/dir"], {}, "is not a directory"),
        ([*BASE, "--log-level", "chatty"], {}, "--log-level: expected one of"),
        ([*BASE, "--name", " "], {}, "name must not be empty"),
        ([*BASE, "--bogus"], {}, "unrecognized arguments"),
    ],
)
def test_unusable_settings_are_refused_with_a_message(argv, environ, message):
    with pytest.raises(UsageError, match=message):
        parse_args(argv, environ=environ)


def test_the_token_can_come_from_a_file(tmp_path):
    path = tmp_path / "token"
    path.write_text("crq_in_a_file\n")
    config = parse_args(["--server", "http://x"], environ={"CRONIQ_TOKEN_FILE": str(path)})
    assert config.token == "crq_in_a_file"


def test_labels_ignore_blanks_and_spaces():
    assert parse_labels(" linux, ,gpu,,x86 ") == ["linux", "gpu", "x86"]
    assert parse_labels("") == []


def test_missing_server_or_token_exits_2_with_usage(monkeypatch, capsys):
    monkeypatch.delenv("CRONIQ_SERVER", raising=False)
    monkeypatch.delenv("CRONIQ_TOKEN", raising=False)
    monkeypatch.delenv("CRONIQ_TOKEN_FILE", raising=False)
    assert main(["--token", "t"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: croniq-runner")
    assert "no server" in err


def test_help_exits_0_and_names_every_environment_variable(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for var in ("CRONIQ_SERVER", "CRONIQ_TOKEN", "CRONIQ_RUNNER_NAME", "CRONIQ_LABELS"):
        assert var in out
    assert "CRONIQ_CAPACITY" in out


def test_the_state_dir_defaults_to_the_users_state_home_per_runner_name(tmp_path):
    environ = {"XDG_STATE_HOME": str(tmp_path)}
    config = parse_args([*BASE, "--name", "build/7"], environ=environ)
    assert config.state_dir == str(tmp_path / "croniq-runner" / "build_7")
    assert config.state_dir_given is False
    given = parse_args(BASE, environ={**environ, "CRONIQ_STATE_DIR": str(tmp_path / "s")})
    assert (given.state_dir, given.state_dir_given) == (str(tmp_path / "s"), True)


@pytest.mark.skipif(os.geteuid() != 0, reason="--run-as is accepted only as root")
def test_run_as_takes_the_users_ids_groups_and_home():
    config = parse_args([*BASE, "--run-as", "nobody"], environ={})
    entry = pwd.getpwnam("nobody")
    assert config.run_as.name == "nobody"
    assert (config.run_as.uid, config.run_as.gid) == (entry.pw_uid, entry.pw_gid)
    assert entry.pw_gid in config.run_as.groups
    assert config.run_as.home == entry.pw_dir
    assert parse_args(BASE, environ={"CRONIQ_RUN_AS": str(entry.pw_uid)}).run_as == config.run_as


def test_run_as_an_unknown_user_is_refused_in_one_line(capsys):
    assert main([*BASE, "--run-as", "no-such-user-here"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "croniq-runner: error: --run-as: no such user 'no-such-user-here'\n"


def test_run_as_without_root_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert main([*BASE, "--run-as", "nobody"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "croniq-runner: error: --run-as: running jobs as 'nobody' needs the agent to run as root\n"
    )


def test_the_token_is_wiped_from_the_environment_the_process_started_with(tmp_path):
    """/proc/PID/environ shows the environment of exec(); the agent's own
    process must not show the token there once it has read it."""
    code = (
        "import os, sys; from croniq_runner.config import forget_token; forget_token(); "
        "sys.stdout.write(str('CRONIQ_TOKEN' in os.environ) + ' '); sys.stdout.flush(); "
        "sys.stdin.read()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "CRONIQ_TOKEN": "crq_wipe-me-please"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout.read(6) == b"False "
        environ = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert b"crq_wipe-me-please" not in environ
    finally:
        process.communicate(b"", timeout=10)


def test_cgroups_are_used_unless_turned_off():
    assert parse_args(BASE, environ={}).cgroups is True
    assert parse_args([*BASE, "--cgroups", "off"], environ={}).cgroups is False
    assert parse_args(BASE, environ={"CRONIQ_CGROUPS": "OFF"}).cgroups is False
    with pytest.raises(UsageError) as refused:
        parse_args([*BASE, "--cgroups", "v2"], environ={})
    assert str(refused.value) == "--cgroups: expected auto or off, got 'v2'"
