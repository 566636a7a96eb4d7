"""docs/design.md is the project's own reference: every section the code,
tests and docs cite (`docs/design.md §N`) is in it, and nothing cites a
design document outside the repository."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"docs/design\.md §(\d+)")


def tracked_texts():
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    for name in listing.stdout.decode().strip("\0").split("\0"):
        path = ROOT / name
        if path.suffix in {".py", ".md", ".html", ".toml", ".yml", ".yaml"} and path.is_file():
            yield name, path.read_text(errors="replace")


def sections():
    text = (ROOT / "docs" / "design.md").read_text()
    found = set()
    for first, last in re.findall(r"^## (\d+)(?:-(\d+))?\.", text, flags=re.M):
        found.update(range(int(first), int(last or first) + 1))
    return found


def test_every_cited_section_is_in_the_design_doc():
    held = sections()
    missing = {
        (name, number)
        for name, text in tracked_texts()
        for number in CITED.findall(text)
        if int(number) not in held
    }
    assert not missing


def test_nothing_cites_a_design_document_outside_the_repository():
    outside = "DESIGN" + ".md"
    assert [name for name, text in tracked_texts() if outside in text] == []


# The contracts the doc lists in full, read from the code that defines them:
# a scope, a setting, a flag, a command or a call added there without its
# line here fails the suite.

DOC = ROOT / "docs" / "design.md"
PARAMETER = re.compile(r"\{[^}]*\}")


def undocumented(names, shown):
    text = DOC.read_text()
    return sorted(name for name in names if shown(name) not in text)


def read(path):
    return (ROOT / path).read_text()


def test_every_scope_is_in_the_design_doc():
    scopes = re.findall(r'^[A-Z_]+ = "([^"]+)"', read("control/scopes.py"), flags=re.M)
    assert "jobs:read" in scopes
    assert undocumented(scopes, lambda scope: f"`{scope}`") == []


def test_every_setting_read_from_the_environment_is_in_the_design_doc():
    names = re.findall(r'\benv[a-z]*\(\s*"([A-Z][A-Z0-9_]*)"', read("croniq_project/settings.py"))
    assert "CRONIQ_LEASE_TTL" in names
    assert undocumented(names, lambda name: f"`{name}`") == []


def test_every_runner_flag_is_in_the_design_doc():
    flags = re.findall(r'add\(\s*"(--[a-z-]+)"', read("runner/croniq_runner/config.py"))
    assert "--server" in flags
    assert undocumented(flags, lambda flag: f"`{flag}") == []


def test_every_croniq_admin_command_is_in_the_design_doc():
    commands = [
        path.stem
        for path in ROOT.glob("*/management/commands/*.py")
        if not path.name.startswith("_")
    ]
    assert "apply" in commands
    assert undocumented(commands, lambda command: f"`{command}") == []


def calls(path, prefix, router="router"):
    """(METHOD path) of each route of `router` in `path`, parameters written `{}`."""
    routes = re.findall(rf'@{router}\.(get|post|put|patch|delete)\(\s*"([^"]*)"', read(path))
    return {
        f"{method.upper()} {prefix}{PARAMETER.sub('{}', route.lstrip('/'))}"
        for method, route in routes
    }


def test_every_http_call_is_in_the_design_doc():
    found = calls("dispatch/api.py", "/api/v1/runners/", "runners_router")
    found |= calls("dispatch/api.py", "/api/v1/executions/", "executions_router")
    for path in sorted((ROOT / "control").glob("*_api.py")):
        found |= calls(path.relative_to(ROOT), "/")
    assert {"POST /api/v1/runners/{}/poll", "POST /jobs/{}/trigger"} <= found
    text = PARAMETER.sub("{}", DOC.read_text())
    assert sorted(call for call in found if f"`{call}`" not in text) == []
