"""`python -m croniq_runner.conformance`: its arguments and output, without a server."""

import json

import pytest

from croniq_runner.conformance.__main__ import line, main
from croniq_runner.conformance.replay import Result, load_cases


def test_list_names_every_case_without_a_server(capsys):
    assert main(["--list"]) == 0
    listed = [row.split(":", 1)[0] for row in capsys.readouterr().out.splitlines()]
    assert listed == [case["name"] for case in load_cases()]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "--server and --token are required"),
        (["--server", "http://x"], "--server and --token are required"),
        (["--server", "http://x", "--token", "t", "--case", "no-such-case"], "unknown case"),
    ],
)
def test_usage_errors_exit_2(argv, message, capsys, monkeypatch):
    monkeypatch.delenv("CRONIQ_SERVER", raising=False)
    monkeypatch.delenv("CRONIQ_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_an_unreachable_server_fails_the_run_with_exit_1(capsys):
    argv = ["--server", "http://127.0.0.1:9", "--token", "t", "--json"]
    assert main([*argv, "--case", "auth-missing-token-is-401"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["pass"], report["fail"], report["skip"]) == (0, 1, 0)
    [case] = report["cases"]
    assert case["name"] == "auth-missing-token-is-401"
    assert case["reason"].startswith('step 1 "register without a token": request failed:')


def test_one_line_per_outcome():
    assert line(Result("a", "pass", seconds=0.4213)) == "PASS a (0.42s)"
    assert line(Result("b", "fail", 'step 2 "x": status: expected 409, got 200', 2)) == (
        'FAIL b: step 2 "x": status: expected 409, got 200'
    )
    assert line(Result("c", "skip", "needs --second-token")) == "SKIP c: needs --second-token"
