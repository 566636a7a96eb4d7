"""core/static/croniq/instants.js, the one function the pages' scripts show
an instant with: the text core.instants writes on the server, in any zone,
whatever the browser's locale would do ("12/05/2026, 04:05:57 AM").

Run in Node (the system's, else the one Playwright bundles), which has the
same Intl as the browsers; the browser tests check it in Chromium too."""

import json
import shutil
import subprocess
import zoneinfo
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.instants import shown

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "core" / "static" / "croniq" / "instants.js"


def node() -> str | None:
    found = shutil.which("node") or shutil.which("nodejs")
    if found:
        return found
    try:
        import playwright
    except ImportError:
        return None
    bundled = Path(playwright.__file__).parent / "driver" / "node"
    return str(bundled) if bundled.exists() else None


def formatted(cases: list[tuple[str, str | None]], locale: str = "en-US") -> list[str]:
    """instants.js's text for each (ISO instant, zone or None: the viewer's),
    in a Node whose own locale and zone are `locale` and America/New_York."""
    runner = node()
    if runner is None:
        pytest.skip("no Node.js to run the pages' scripts in")
    program = (
        "globalThis.window = globalThis;\n"
        + SCRIPT.read_text()
        + "\nconst cases = JSON.parse(process.argv[1]);\n"
        "console.log(JSON.stringify(cases.map(([at, zone]) =>"
        " window.CroniqInstants.format(new Date(at), zone || undefined))));\n"
    )
    env = {"TZ": "America/New_York", "LANG": f"{locale.replace('-', '_')}.UTF-8"}
    done = subprocess.run(
        [runner, "-e", program, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("at", "zone", "text"),
    [
        ("2026-12-05T08:00:00Z", "UTC", "2026-12-05 08:00:00 UTC"),
        ("2026-12-05T08:00:00Z", "Europe/Berlin", "2026-12-05 09:00:00 CET"),
        ("2026-07-05T08:00:00Z", "Europe/Berlin", "2026-07-05 10:00:00 CEST"),
        ("2026-12-05T16:05:57Z", "America/New_York", "2026-12-05 11:05:57 EST"),
        ("2026-12-05T16:05:57Z", "Europe/London", "2026-12-05 16:05:57 GMT"),
        # Spring forward in Berlin, 29 March 2026, and fall back, 25 October.
        ("2026-03-29T00:59:59Z", "Europe/Berlin", "2026-03-29 01:59:59 CET"),
        ("2026-03-29T01:00:00Z", "Europe/Berlin", "2026-03-29 03:00:00 CEST"),
        ("2026-10-25T00:30:00Z", "Europe/Berlin", "2026-10-25 02:30:00 CEST"),
        ("2026-10-25T01:30:00Z", "Europe/Berlin", "2026-10-25 02:30:00 CET"),
    ],
)
def test_the_script_writes_what_the_server_writes(at, zone, text):
    assert formatted([(at, zone)]) == [text]
    instant = datetime.fromisoformat(at).astimezone(UTC)
    assert shown(instant, zoneinfo.ZoneInfo(zone)) == text


@pytest.mark.parametrize("locale", ["en-US", "de-DE", "ar-EG"])
def test_the_browsers_locale_changes_nothing_but_the_zone_is_the_viewers(locale):
    # Node's own zone (the viewer's) is New York: 04:05:57 in the morning,
    # never "12/05/2026, 04:05:57 AM", "05.12.2026" or Arabic digits.
    cases = [("2026-12-05T09:05:57Z", None), ("2026-12-05T05:00:00Z", None)]
    assert formatted(cases, locale) == ["2026-12-05 04:05:57 EST", "2026-12-05 00:00:00 EST"]


def test_a_zone_with_no_abbreviation_is_named_by_its_offset():
    assert formatted([("2026-12-05T08:00:00Z", "Asia/Tokyo")]) == ["2026-12-05 17:00:00 GMT+9"]
