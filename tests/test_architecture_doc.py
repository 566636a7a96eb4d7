"""docs/architecture.md stays true: every file it names exists, and its
module map names every module of the apps and of the runner package."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
MAPPED = [
    "calendars", "scheduler", "runners", "notifications", "checks", "control", "audit", "vault",
    "runner/croniq_runner",
]  # fmt: skip
# Django's own files in every app: the map names what holds Croniq's logic.
WIRING = {"__init__.py", "apps.py", "admin.py", "urls.py", "validators.py"}


def named_paths():
    """`app/module.py` in backticks, as the page writes them."""
    return set(re.findall(r"`([a-z_/]+\.py)`", DOC))


def where(path):
    for base in (ROOT, ROOT / "runner"):
        if (base / path).exists():
            return base / path
    return None


def test_every_file_the_page_names_exists():
    missing = sorted(path for path in named_paths() if "/" in path and where(path) is None)
    assert missing == []


def test_the_module_map_names_every_module():
    unnamed = []
    for app in MAPPED:
        for module in sorted((ROOT / app).glob("*.py")):
            if module.name not in WIRING and f"`{module.name}`" not in DOC:
                unnamed.append(f"{app}/{module.name}")
    assert unnamed == []
