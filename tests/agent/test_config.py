import socket

import pytest

from runners.agent import EXIT_USAGE, main
from runners.agent_config import UsageError, parse_args, parse_labels

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
