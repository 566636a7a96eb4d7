"""The README's `croniq-admin` commands are real: each names a management
command and only flags that command takes, and `croniq-admin` itself is the
installed entry point (pyproject.toml) that runs them."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class

from scheduler.apply.reference import reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# `croniq-admin apply FILE --dry-run`: up to a code span's end, a comment,
# a redirection or a pipe.
INVOCATION = re.compile(r"croniq-admin ([a-z_]+)([^`#>|\n]*)")


def invocations():
    return sorted({(name, rest.strip()) for name, rest in INVOCATION.findall(README)})


def options_of(name):
    command = load_command_class(get_commands()[name], name)
    return set(command.create_parser("croniq-admin", name)._option_string_actions)


def test_the_readme_uses_croniq_admin_not_python_manage_py():
    assert "python manage.py" not in README
    names = {name for name, _ in invocations()}
    assert {"apply", "apply_reference", "createsuperuser", "migrate", "serve"} <= names


@pytest.mark.parametrize(("name", "rest"), invocations())
def test_each_readme_command_and_flag_exists(name, rest):
    assert name in get_commands(), f"croniq-admin {name}: no such command"
    flags = {flag.split("=", 1)[0] for flag in re.findall(r"--[a-z][a-z-]*", rest)}
    unknown = flags - options_of(name)
    assert not unknown, f"croniq-admin {name}: no option {', '.join(sorted(unknown))}"


def test_croniq_admin_is_an_installed_entry_point_to_the_management_commands(tmp_path):
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["croniq-admin"] == "croniq_project.cli:main"
    program = Path(sys.executable).with_name("croniq-admin")
    # From another directory: no checkout, no manage.py needed.
    answer = subprocess.run(
        [program, "apply_reference"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout == reference()
