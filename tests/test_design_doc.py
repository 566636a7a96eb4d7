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
