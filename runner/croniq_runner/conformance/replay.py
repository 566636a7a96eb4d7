"""Replay the cases against a live server, one case after another.

Each case starts from fresh values (`unique` is new for every case, so its
runner names and sessions are its own) and stops at its first failing step.
"""

import json
import shlex
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources

import requests

from croniq_runner.conformance.matching import (
    NOT_JSON,
    CaseError,
    brief,
    expectation_errors,
    lookup,
    substitute,
)

DEFAULT_HEADERS = {"Authorization": "Bearer ${token}"}
DEFAULT_LABEL = "croniq-conformance"
REQUIRES = {
    "second_token": "needs --second-token (a second runner token)",
    "operator": "needs --operator (a command that acts as an operator)",
}


@dataclass
class Config:
    server: str
    token: str
    second_token: str | None = None
    operator: str | None = None
    label: str = DEFAULT_LABEL
    timeout: float = 70.0


@dataclass
class Result:
    name: str
    outcome: str  # "pass", "fail" or "skip"
    reason: str = ""
    step: int | None = None
    seconds: float = 0.0

    def as_dict(self):
        return {
            "name": self.name,
            "outcome": self.outcome,
            "reason": self.reason,
            "step": self.step,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class StepFailed(Exception):
    number: int
    title: str
    problems: list = field(default_factory=list)

    def __str__(self):
        return f'step {self.number} "{self.title}": ' + "; ".join(self.problems)


class SkipCase(Exception):
    """The server lacks an addition to the protocol the case is about."""


def load_cases(folder=None):
    """Every case of every `cases/*.json` file, in file then listing order."""
    folder = folder or resources.files("croniq_runner.conformance") / "cases"
    cases = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if path.name.endswith(".json"):
            cases += json.loads(path.read_text(encoding="utf-8"))["cases"]
    names = [case["name"] for case in cases]
    doubles = {name for name in names if names.count(name) > 1}
    if doubles:
        raise CaseError(f"case names used twice: {', '.join(sorted(doubles))}")
    return cases


def initial_values(config):
    values = {"token": config.token, "label": config.label, "unique": uuid.uuid4().hex[:10]}
    if config.second_token:
        values["second_token"] = config.second_token
    return values


def missing_requirement(case, config):
    for need in case.get("requires", []):
        if need in REQUIRES and not getattr(config, need):
            return REQUIRES[need]
    return None


def run_case(case, config, http=None):
    started = time.monotonic()
    name = case["name"]
    missing = missing_requirement(case, config)
    if missing:
        return Result(name, "skip", missing)
    http = http or requests.Session()
    values = initial_values(config)
    try:
        for number, step in enumerate(case["steps"], start=1):
            run_step(number, step, values, config, http)
    except StepFailed as failed:
        return Result(name, "fail", str(failed), failed.number, time.monotonic() - started)
    except SkipCase as skipped:
        return Result(name, "skip", str(skipped), seconds=time.monotonic() - started)
    return Result(name, "pass", seconds=time.monotonic() - started)


def run_step(number, step, values, config, http):
    title = step.get("step", "")
    try:
        if "operator" in step:
            problems = operate(substitute(step["operator"], values), config)
        else:
            problems = exchange(step, values, config, http)
    except CaseError as error:
        problems = [f"case error: {error}"]
    if problems:
        raise StepFailed(number, title, problems)


def exchange(step, values, config, http):
    """Send the step's request; check the answer; capture values from it."""
    request = step["request"]
    headers = substitute(request.get("headers", DEFAULT_HEADERS), values)
    if "raw" in request:
        data = substitute(request["raw"], values).encode("utf-8")
        headers.setdefault("Content-Type", "application/json")
    else:
        data = json.dumps(substitute(request.get("json", {}), values)).encode("utf-8")
        headers.setdefault("Content-Type", "application/json")
    url = config.server.rstrip("/") + substitute(request["path"], values)
    started = time.monotonic()
    try:
        answer = http.request(
            request.get("method", "POST"), url, data=data, headers=headers, timeout=config.timeout
        )
    except requests.RequestException as error:
        return [f"request failed: {error}"]
    elapsed = time.monotonic() - started
    try:
        body = answer.json()
    except ValueError:
        body = NOT_JSON
    problems = expectation_errors(step.get("expect", {}), answer.status_code, body, elapsed, values)
    if problems:
        shown = brief(body) if body is not NOT_JSON else brief(answer.text)
        return [*problems, f"answer {answer.status_code} {shown}"]
    for name, path in step.get("capture", {}).items():
        values[name] = lookup(body, path)
    unless = step.get("skip_unless")
    if unless and expectation_errors(unless, answer.status_code, body, elapsed, values):
        # An addition the server does not answer (an older server): skipped.
        raise SkipCase(unless.get("reason") or f"the server lacks {brief(unless)}")
    return []


def operate(action, config):
    """An operator's act the protocol has no call for (e.g. a cancel request):
    `--operator CMD` is run as `CMD ACTION JSON` and must exit 0."""
    if not config.operator:
        return ["no --operator command given"]
    args = [*shlex.split(config.operator), action["action"], json.dumps(action)]
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"operator command failed: {error}"]
    if done.returncode != 0:
        return [f"operator command exited {done.returncode}: {done.stderr.strip()[-500:]}"]
    return []
