"""Every metric the README names is on the first scrape of a new install,
with a help text of its own: an alert on a counter's `increase()` sees its
first event, and nobody wonders what a series means."""

import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

README = Path(__file__).resolve().parents[1] / "README.md"
# `croniq_retries_total{reason}`: the name, and the labels the README gives it.
NAMED = re.compile(r"`(croniq_[a-z_]+)(?:\{([a-z_,]+)\})?`")
# Labels whose values are known before anything happened (README, "Alerting").
FIXED_LABELS = {"state", "reason", "kind", "outcome"}


def readme_metrics():
    """{metric name: label names} of every metric the README names."""
    return {
        name: set(labels.split(",")) if labels else set()
        for name, labels in NAMED.findall(README.read_text())
    }


@pytest.fixture
def first_scrape(db, client):
    answer = client.get("/metrics")
    assert answer.status_code == 200
    return answer.content.decode()


def test_the_readme_names_the_counters_of_the_runs(first_scrape):
    named = readme_metrics()
    for name in ("croniq_executions_handed_back_total", "croniq_retries_total"):
        assert name in named


def test_every_metric_the_readme_names_has_a_help_text_of_its_own(first_scrape):
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", first_scrape, re.MULTILINE))
    for name in readme_metrics():
        assert name in helps, f"{name} is not on the first scrape"
        assert helps[name] and not helps[name].startswith("Croniq counter"), name


def test_counters_with_known_labels_start_at_zero(first_scrape):
    families = {f.name: f for f in text_string_to_metric_families(first_scrape)}
    for name, labels in readme_metrics().items():
        if not name.endswith("_total") or not labels <= FIXED_LABELS:
            continue  # a series per job, runner or channel: there are none yet
        family = families[name.removesuffix("_total")]
        values = [s.value for s in family.samples if s.name == name]
        assert values and set(values) == {0}, name
