"""Database-vendor code lives in core.db (and core.wakeups, core.commits).

A module outside core/ that still compares the vendor string (reads a
connection's `vendor`, or compares a string with "postgresql" or "sqlite")
does so because the behaviour itself differs by design, and says why in a
comment on the same line or the line before. Everything else asks core.db
(`on_postgres()`, its helpers, or `db.vendor()` as the key of a per-vendor
SQL table).
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Not the server's code: the tests, the benches, the runner agent (no
# Django), and migrations (frozen history, written against the schema
# editor's connection).
SKIPPED = {"core", "tests", "bench", "runner", "harness", "deploy", "docs", "templates"}
VENDORS = {"postgresql", "sqlite"}
# Files whose branches another change is moving into core.db; remove each
# once it has none left.
PENDING: set[str] = set()


def sources():
    for path in sorted(ROOT.glob("*/**/*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in SKIPPED or parts[0].startswith(".") or "migrations" in parts:
            continue
        yield path


def vendor_lines(tree):
    """Line numbers where `tree` reads or compares the vendor string (a
    call of `vendor()`, core.db's, is no read)."""
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "vendor" and id(node) not in called:
            yield node.lineno
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in VENDORS for o in operands):
                yield node.lineno


def commented(lines, number):
    """Whether line `number` (1-based) or the one before carries a comment."""
    here = lines[number - 1]
    before = lines[number - 2].strip() if number > 1 else ""
    return "#" in here or before.startswith("#")


def uncommented():
    found = {}
    for path in sources():
        text = path.read_text()
        lines = text.splitlines()
        bare = sorted(
            {n for n in vendor_lines(ast.parse(text, str(path))) if not commented(lines, n)}
        )
        if bare:
            found[str(path.relative_to(ROOT))] = bare
    return found


def test_vendor_branches_outside_core_say_why_they_differ():
    found = {path: lines for path, lines in uncommented().items() if path not in PENDING}
    assert found == {}, (
        "ask core.db, or say in a comment why the behaviour differs by design: "
        + ", ".join(f"{path}:{lines}" for path, lines in found.items())
    )


def test_files_pending_a_move_to_core_still_have_a_branch():
    # A file done moving leaves PENDING: the first test then guards it too.
    found = uncommented()
    assert [path for path in sorted(PENDING) if path not in found] == []


def test_the_check_sees_a_vendor_branch_and_its_comment():
    code = 'if connection.vendor == "postgresql":\n    pass\nx = 1 if name == "sqlite" else 2\n'
    tree = ast.parse(code + "sql = TABLE[db.vendor()]\n")
    assert sorted(set(vendor_lines(tree))) == [1, 3]
    commented_code = "# SQLite has no arrays\n" + code.replace("else 2", "else 2  # pauses")
    lines = commented_code.splitlines()
    assert all(commented(lines, n) for n in vendor_lines(ast.parse(commented_code)))
