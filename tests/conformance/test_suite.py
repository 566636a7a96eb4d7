"""The conformance suite against a real uvicorn and scheduler_loop, on the
backend the test suite runs on; and against the same server behind a proxy
that breaks one protocol rule, which the suite must catch."""

import json
import re
import subprocess
import sys

import pytest

from croniq_runner.conformance.replay import load_cases
from harness.processes import (
    ROOT,
    drop_database,
    manage,
    migrated_database,
    process_env,
    start_loop,
)
from tests.conformance.rewriting_proxy import RewritingProxy
from tests.e2e.protocol_client import start_server, token

pytestmark = pytest.mark.e2e

PACKAGE = ROOT / "runner" / "croniq_runner" / "conformance"
OPERATOR = f"{sys.executable} {ROOT / 'tests' / 'conformance' / 'act_as_operator.py'}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A migrated database with two runner tokens and the suite's job
    applied, a web server and a scheduler loop."""
    folder = tmp_path_factory.mktemp("conformance")
    url = migrated_database(folder)
    manage(url, "apply", str(PACKAGE / "job.yaml"))
    secrets = token(url), token(url)
    server = start_server(url, folder / "web.log")
    loop = start_loop(url, folder / "loop.log")
    yield {"url": url, "server": server, "secrets": secrets}
    loop.stop()
    server.stop()
    drop_database(url)


def conformance(world, server_url, *args):
    first, second = world["secrets"]
    env = process_env(world["url"], PYTHONPATH=ROOT / "runner")
    command = [sys.executable, "-m", "croniq_runner.conformance", "--server", server_url]
    command += ["--token", first, "--second-token", second, "--operator", OPERATOR, *args]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_case_passes_against_the_server(world):
    run = conformance(world, world["server"].url, "--json")
    report = json.loads(run.stdout)
    failed = [case for case in report["cases"] if case["outcome"] != "pass"]
    assert failed == [], run.stdout
    assert run.returncode == 0, run.stderr
    assert {case["name"] for case in report["cases"]} == {case["name"] for case in load_cases()}
    assert (report["pass"], report["fail"], report["skip"]) == (len(load_cases()), 0, 0)
    assert "Traceback" not in world["server"].output()


def test_one_case_runs_alone_and_prints_one_line(world):
    run = conformance(world, world["server"].url, "--case", "finish-under-a-stale-lease-is-409")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"PASS finish-under-a-stale-lease-is-409 \(\d+\.\d\ds\)", lines[0])
    assert lines[1:] == ["1 cases: 1 passed, 0 failed, 0 skipped"]


def accept_stale_finishes(method, path, status, body):
    """The planted break: a server that answers a stale finish 200."""
    if path.endswith("/finish") and status == 409:
        return 200, b'{"state": "succeeded"}'
    return status, body


def test_the_suite_fails_when_a_stale_finish_is_accepted(world):
    proxy = RewritingProxy(world["server"].port, accept_stale_finishes)
    try:
        run = conformance(world, proxy.url)
    finally:
        proxy.close()
    assert proxy.rewritten  # the break was planted
    assert run.returncode == 1, run.stdout
    failures = dict(
        re.fullmatch(r"FAIL (\S+): (.*)", line).groups()
        for line in run.stdout.splitlines()
        if line.startswith("FAIL ")
    )
    assert set(failures) == {
        "register-takeover-fences-the-old-session",
        "finish-under-a-stale-lease-is-409",
        "hand-back-releases-unstarted-work",
    }, run.stdout
    assert failures["finish-under-a-stale-lease-is-409"].startswith(
        'step 3 "finish under a wrong lease": status: expected 409, got 200'
    )
    passed = [line for line in run.stdout.splitlines() if line.startswith("PASS ")]
    assert len(passed) == len(load_cases()) - 3
    assert run.stdout.splitlines()[-1].endswith("3 failed, 0 skipped")


def test_without_a_second_token_or_operator_those_cases_are_skipped(world):
    first, _ = world["secrets"]
    env = process_env(world["url"], PYTHONPATH=ROOT / "runner")
    names = ["register-binding-refuses-another-token", "heartbeat-reports-a-cancel-request"]
    command = [sys.executable, "-m", "croniq_runner.conformance", "--json"]
    command += ["--server", world["server"].url, "--token", first]
    for name in names:
        command += ["--case", name]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert [(c["name"], c["outcome"]) for c in report["cases"]] == [(n, "skip") for n in names]


def drop_cancel_from_heartbeats(method, path, status, body):
    """Another planted break: heartbeat answers without their `cancel` key."""
    if path.endswith("/heartbeat") and status == 200:
        answer = json.loads(body)
        del answer["cancel"]
        return status, json.dumps(answer).encode()
    return status, body


def test_the_suite_fails_when_an_answer_lacks_a_required_key(world):
    proxy = RewritingProxy(world["server"].port, drop_cancel_from_heartbeats)
    try:
        run = conformance(world, proxy.url, "--json", "--case", "heartbeat-renews-a-held-lease")
    finally:
        proxy.close()
    assert run.returncode == 1, run.stdout
    [case] = json.loads(run.stdout)["cases"]
    assert (case["outcome"], case["step"]) == ("fail", 3)
    assert "body: missing key 'cancel'" in case["reason"]


def as_an_older_server(method, path, status, body):
    """A server from before the additions: no `features`, and a 404 for the
    batch finish."""
    if path.endswith("/register") and status == 200:
        answer = json.loads(body)
        del answer["features"]
        return status, json.dumps(answer).encode()
    if "/runners/" in path and path.endswith("/finish"):
        return 404, b'{"detail": "Not Found"}'
    return status, body


def test_cases_of_an_addition_are_skipped_on_a_server_without_it(world):
    names = [case["name"] for case in load_cases() if case["name"].startswith("finish-many")]
    proxy = RewritingProxy(world["server"].port, as_an_older_server)
    try:
        args = ["--json"] + [arg for name in names for arg in ("--case", name)]
        run = conformance(world, proxy.url, *args)
    finally:
        proxy.close()
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert [(c["name"], c["outcome"]) for c in report["cases"]] == [(n, "skip") for n in names]
    assert report["cases"][0]["reason"] == (
        "the server does not list finish-many in its registration's features"
    )
    assert len(names) == 2
