"""The agent must run where only the standard library and requests exist."""

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "runner" / "croniq_runner"
MODULES = sorted(PACKAGE.rglob("*.py"))


def imported_roots(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module


# The optional extras' modules and what each may import besides: `croniq
# mcp`'s server (`pip install 'croniq-runner[mcp]'`), imported only when the
# command runs (tests/cli/test_mcp_tools.py).
EXTRAS = {"mcp_server.py": {"mcp", "pydantic"}}


def test_the_package_imports_only_the_standard_library_requests_and_itself():
    assert len(MODULES) >= 10
    allowed = set(sys.stdlib_module_names) | {"requests", "croniq_runner"}
    for path in MODULES:
        extra = EXTRAS.get(path.name, set())
        for name in imported_roots(path):
            assert name.split(".")[0] in allowed | extra, f"{path.name} imports {name}"


def test_the_supervisor_imports_only_the_standard_library():
    """It runs as a script with `-I -S`: not even its own package is in reach."""
    for name in imported_roots(PACKAGE / "supervisor.py"):
        assert name.split(".")[0] in sys.stdlib_module_names, name


def test_the_package_itself_imports_nothing():
    assert list(imported_roots(PACKAGE / "__init__.py")) == []


def test_importing_the_agent_loads_no_django():
    code = (
        "import sys, croniq_runner.agent; "
        "print(sorted(m for m in sys.modules if m.startswith('django')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert result.stdout.strip() == "[]"
