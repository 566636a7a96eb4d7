"""The check-ins' settings (docs/design.md §6): CRONIQ_PING_LIMIT,
CRONIQ_PING_WINDOW and CRONIQ_CHECK_PINGS_KEPT are read when the settings
load, and a bad value stops start-up with one line naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks import pings, retention

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("CRONIQ_PING_LIMIT", "CRONIQ_PING_WINDOW", "CRONIQ_CHECK_PINGS_KEPT")
# Loads the settings module once per value, as start-up does, and says what came of it.
SCRIPT = """\
import os, runpy, sys
from django.core.exceptions import ImproperlyConfigured
os.environ[sys.argv[1]] = sys.argv[2]
try:
    loaded = runpy.run_path("croniq_project/settings.py")
    print("ACCEPTED", loaded[sys.argv[1]])
except ImproperlyConfigured as e:
    print("REFUSED", e)
"""


def loaded(name: str, value: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in (*NAMES, "DATABASE_URL")}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, name, value],
        cwd=ROOT,
        env={**env, "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("value", ["0", "lots", "1.5", "-3"])
def test_a_bad_value_is_refused_naming_the_variable(name, value):
    answer = loaded(name, value)
    assert answer.startswith(f"REFUSED {name}:"), answer


@pytest.mark.parametrize(("name", "value"), [(n, "7") for n in NAMES])
def test_a_good_value_is_taken(name, value):
    assert loaded(name, value) == "ACCEPTED 7"


def test_the_defaults_are_sixty_pings_a_minute_and_a_hundred_kept():
    from django.conf import settings

    assert (settings.CRONIQ_PING_LIMIT, settings.CRONIQ_PING_WINDOW) == (60, 60)
    assert settings.CRONIQ_CHECK_PINGS_KEPT == 100


def test_the_pings_and_retention_read_the_settings(settings):
    settings.CRONIQ_PING_LIMIT, settings.CRONIQ_PING_WINDOW = 5, 10
    settings.CRONIQ_CHECK_PINGS_KEPT = 3
    assert pings.limit() == (5, 10)
    assert retention.kept() == 3
