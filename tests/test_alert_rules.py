"""deploy/prometheus/alerts.yml: valid, unit-tested with promtool, and built
only on series Croniq really exports.

promtool ships in the Debian package `prometheus`. Without it these tests
skip locally, but fail in CI (CI set), where it must be installed.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from croniq_project.collector import CroniqCollector

RULES_DIR = Path(__file__).resolve().parents[1] / "deploy" / "prometheus"
RULES = RULES_DIR / "alerts.yml"
RULE_TESTS = RULES_DIR / "alerts_test.yml"


def promtool():
    path = shutil.which("promtool")
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail("promtool is missing in CI: install the Debian package `prometheus`")
    pytest.skip("promtool not installed (apt-get install prometheus); CI runs these")


def run_promtool(*args):
    result = subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, cwd=RULES_DIR
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def alerts():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def test_the_alert_rules_are_valid_for_promtool():
    output = run_promtool("check", "rules", RULES.name)
    assert f"SUCCESS: {len(alerts())} rules found" in output


def test_the_alert_rule_unit_tests_pass():
    run_promtool("test", "rules", RULE_TESTS.name)


def test_every_alert_has_a_unit_test_where_it_fires():
    firing = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in alerts()} <= firing


def test_every_alert_has_a_severity_and_a_summary():
    for rule in alerts():
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


def test_the_rules_use_only_series_croniq_exports(db):
    registry = CollectorRegistry()
    registry.register(CroniqCollector())
    exported = {
        sample.name
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
    }
    # A family exports its name (HELP and TYPE) before it has samples: the
    # per-job and notification series of an empty installation.
    for family in registry.collect():
        exported |= {family.name, family.name + "_total" if family.type == "counter" else ""}
    used = {name for rule in alerts() for name in re.findall(r"croniq_[a-z_]+", rule["expr"])}
    assert used
    assert used <= exported, used - exported
