"""`croniq_checks{state}` on /metrics (docs/design.md §12)."""

from datetime import UTC, datetime

from prometheus_client import generate_latest
from prometheus_client.core import CollectorRegistry

from croniq_project.collector import CroniqCollector
from tests.checks.factories import CheckFactory

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def check_lines():
    registry = CollectorRegistry()
    registry.register(CroniqCollector(clock=lambda: NOW))
    text = generate_latest(registry).decode()
    return sorted(line for line in text.splitlines() if line.startswith("croniq_checks{"))


def test_every_state_is_counted_from_zero(db):
    assert check_lines() == [
        f'croniq_checks{{state="{state}"}} 0.0' for state in ("down", "late", "new", "paused", "up")
    ]


def test_checks_are_counted_by_state(db):
    for state in ("up", "up", "down", "new"):
        CheckFactory(state=state)
    assert check_lines() == [
        'croniq_checks{state="down"} 1.0',
        'croniq_checks{state="late"} 0.0',
        'croniq_checks{state="new"} 1.0',
        'croniq_checks{state="paused"} 0.0',
        'croniq_checks{state="up"} 2.0',
    ]
