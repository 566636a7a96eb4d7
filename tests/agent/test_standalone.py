"""The agent must run where only the standard library and requests exist."""

import ast
import subprocess
import sys
from pathlib import Path

RUNNERS = Path(__file__).resolve().parents[2] / "runners"
AGENT_MODULES = sorted(RUNNERS.glob("agent*.py"))


def imported_roots(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


def test_agent_modules_import_only_the_standard_library_requests_and_each_other():
    assert len(AGENT_MODULES) >= 2
    allowed = set(sys.stdlib_module_names) | {"requests"}
    for path in AGENT_MODULES:
        for name in imported_roots(path):
            root = name.split(".")[0]
            own = name.startswith("runners.agent")
            assert own or root in allowed, f"{path.name} imports {name}"


def test_the_runners_package_itself_imports_nothing():
    assert list(imported_roots(RUNNERS / "__init__.py")) == []


def test_importing_the_agent_loads_no_django():
    code = (
        "import sys, runners.agent; print(sorted(m for m in sys.modules if m.startswith('django')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=RUNNERS.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert result.stdout.strip() == "[]"
