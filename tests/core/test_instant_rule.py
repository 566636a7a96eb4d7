"""One way to show an instant (core.instants, core/static/croniq/instants.js):
no template, page script or Python format of Croniq's writes a time in the
browser's locale or on a 12-hour clock. A page once showed "Sat 2026-12-05
04:07:57 UTC" beside "12/05/2026, 04:05:57 AM UTC" (toLocaleString), and a
German team read 12/05 as the 12th of May."""

import re
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
SHARED_SCRIPT = ROOT / "core" / "static" / "croniq" / "instants.js"

# Script that writes a time by the browser's locale or on its own.
SCRIPT_RULES = [
    (re.compile(r"\btoLocale(Date|Time)?String\b"), "toLocaleString: the browser's locale"),
    (re.compile(r"\bhour12\s*:\s*true\b"), "a 12-hour clock"),
    (re.compile(r"\bhourCycle\s*:\s*[\"']h1[12][\"']"), "a 12-hour clock"),
    (re.compile(r"\bIntl\.DateTimeFormat\b"), "a formatter of its own: use CroniqInstants"),
    (
        re.compile(r"\.get(UTC)?(FullYear|Month|Date|Hours|Minutes|Seconds)\s*\("),
        "a date written by hand: use CroniqInstants",
    ),
]
# Django's date format characters that keep to ISO order, the 24-hour clock
# and the zone (Y-m-d H:i:s T, c for ISO 8601); any other (a, A, P, g, h:
# 12-hour; D, N, M, F, j, n: names and unpadded days) is refused.
DJANGO_DATE_CHARS = set("YmdHisTcOUuZe")
DATE_FILTER = re.compile(r"\|\s*(date|time)\s*:\s*([\"'])(.*?)\2|\{%\s*now\s+([\"'])(.*?)\4")
HUMANISED = re.compile(r"\|\s*(naturaltime|naturalday|timesince|timeuntil)\b")
# strftime patterns and f-string format specs with a 12-hour hour or AM/PM.
TWELVE_HOUR = re.compile(r"%[Ilp]")
PY_FORMATS = re.compile(r"strftime\(\s*[rf]?([\"'])(.*?)\1|\{[^{}:\n]+:([^{}\n]*%[^{}\n]*)\}")


def own(path: str) -> bool:
    """Whether an app lives in this checkout (its virtualenv, often inside
    the checkout too, holds Django's and other packages' apps)."""
    return Path(path).is_relative_to(ROOT) and "site-packages" not in Path(path).parts


def croniq_dirs(kind: str) -> list[Path]:
    """The `kind` (templates, static) directories of Croniq's own apps, and
    the project's template directories."""
    found = [
        Path(app.path) / kind
        for app in apps.get_app_configs()
        if own(app.path) and (Path(app.path) / kind).is_dir()
    ]
    if kind == "templates":
        found += [Path(d) for engine in settings.TEMPLATES for d in engine["DIRS"]]
    return found


def files(kind: str, pattern: str) -> list[Path]:
    return sorted(p for d in croniq_dirs(kind) for p in d.rglob(pattern))


def python_files() -> list[Path]:
    apps_here = [Path(a.path) for a in apps.get_app_configs() if own(a.path)]
    roots = [*apps_here, ROOT / "croniq_project", ROOT / "runner" / "croniq_runner"]
    return sorted(p for root in roots for p in root.rglob("*.py"))


def script_problems(path: Path, text: str) -> list[str]:
    found = []
    for pattern, why in SCRIPT_RULES:
        if "CroniqInstants" in why and path == SHARED_SCRIPT:
            continue
        found += [f"{path.relative_to(ROOT)}: {m.group(0)} ({why})" for m in pattern.finditer(text)]
    return found


def template_problems(path: Path, text: str) -> list[str]:
    found = []
    for match in DATE_FILTER.finditer(text):
        chars = re.sub(r"\\.", "", match.group(3) or match.group(5) or "")
        wrong = sorted({c for c in chars if c.isalpha()} - DJANGO_DATE_CHARS)
        if wrong:
            found.append(f"{path.relative_to(ROOT)}: {match.group(0)} ({''.join(wrong)})")
    found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in HUMANISED.finditer(text)]
    return found


def test_the_scan_sees_the_pages_and_their_scripts():
    scripts = {p.relative_to(ROOT).as_posix() for p in files("static", "*.js")}
    templates = {p.relative_to(ROOT).as_posix() for p in files("templates", "*.html")}
    assert {"dashboard/static/dashboard/dashboard.js", "core/static/croniq/instants.js"} <= scripts
    assert {"templates/base.html", "dashboard/templates/dashboard/job.html"} <= templates


def test_no_page_script_writes_a_time_of_its_own():
    problems = []
    for path in files("static", "*.js"):
        problems += script_problems(path, path.read_text())
    # Scripts inside templates too.
    for path in files("templates", "*.html"):
        problems += script_problems(path, path.read_text())
    assert problems == []


def test_no_template_formats_a_date_but_in_iso_order_on_a_24_hour_clock():
    problems = []
    for path in files("templates", "*.html"):
        problems += template_problems(path, path.read_text())
    assert problems == []


def test_no_python_format_writes_a_12_hour_clock():
    problems = []
    for path in python_files():
        for match in PY_FORMATS.finditer(path.read_text()):
            spec = match.group(2) or match.group(3) or ""
            if TWELVE_HOUR.search(spec):
                problems.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert problems == []


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ("el.textContent = at.toLocaleString();", True),
        ("at.toLocaleTimeString([], {hour: '2-digit'})", True),
        ("new Intl.DateTimeFormat(undefined, {hour12: true})", True),
        ("{hourCycle: 'h12'}", True),
        ("var hours = at.getHours();", True),
        ("var age = Date.now() - new Date(cell.dataset.lastSeen);", False),
        ("el.textContent = CroniqInstants.format(at);", False),
    ],
)
def test_the_script_rules_catch_what_they_are_for(text, caught):
    assert bool(script_problems(ROOT / "x.js", text)) is caught


@pytest.mark.parametrize(
    ("text", "caught"),
    [
        ("{{ run.finished_at|date:'N j, Y, P' }}", True),
        ('{{ value|time:"g:i A" }}', True),
        ("{% now 'D d M Y' %}", True),
        ("{{ value|naturaltime }}", True),
        ("data-last-seen=\"{{ runner.last_seen_at|date:'c' }}\"", False),
        ('{{ value|date:"Y-m-d H:i:s T" }}', False),
        ('{{ value|date:"Y-m-d \\a\\t H:i" }}', False),
    ],
)
def test_the_template_rules_catch_what_they_are_for(text, caught):
    assert bool(template_problems(ROOT / "x.html", text)) is caught
