"""The typed core stays typed: mypy passes on the modules pyproject.toml's
[tool.mypy] lists (the pure modules, every function annotated), as
`make lint` runs it. A module that loses an annotation or gains a type
error fails here, not only in the linter."""

import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "pyproject.toml"


def test_the_typed_core_is_listed():
    files = tomllib.loads(CONFIG.read_text())["tool"]["mypy"]["files"]
    assert "runner/croniq_runner" in files
    assert "calendars/rules.py" in files
    for name in files:
        assert (ROOT / name).exists(), f"[tool.mypy] files names {name}, which does not exist"


def test_mypy_finds_no_errors_in_the_typed_core(monkeypatch):
    # The files in the config are relative to the checkout. The cache is
    # `make lint`'s (.mypy_cache, ignored by git): mypy checks each entry
    # against its source, and a warm cache keeps this test to a second or two.
    monkeypatch.chdir(ROOT)
    out, err, status = api.run(["--config-file", str(CONFIG)])
    assert status == 0, f"mypy found errors in the typed core:\n{out}{err}"
    assert "Success: no issues found" in out
