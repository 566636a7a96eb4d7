"""From check to job, the watching half (docs/design.md §13), with real
processes: a crontab imported as checks, applied, wrapped by the server
around the checks' tokens, and two of its wrapped lines run as cron runs
them, through the installed `croniq-runner wrap`, against uvicorn."""

import subprocess

import pytest
import yaml

from croniq_runner.crontab import blank_split, split_percent
from harness.processes import manage, query
from harness.runner_venv import runner_venv

pytestmark = pytest.mark.e2e

CRONTAB = """\
# deploy's crontab on web1
SHELL=/bin/sh
MAILTO=ops@example.com

*/5 * * * * printf 'queue: \\%s\\n' "$(echo empty)"; echo "it's fine" >&2
30 2 * * * cd /tmp && echo 'disk full' && exit 3
@reboot /usr/local/bin/start-tunnel.sh
"""


def run_as_cron(line, tmp_path):
    """What cron does with the line: the command after the five fields, cut at
    `%`, run by `sh -c` with cron's small environment (croniq-runner on PATH)."""
    command, stdin = split_percent(blank_split(line, 5)[5])
    env = {"PATH": f"{runner_venv()}:/usr/bin:/bin", "HOME": str(tmp_path), "SHELL": "/bin/sh"}
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=(stdin or "").encode(),
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def check_row(database_url, name):
    [row] = query(
        database_url,
        "SELECT state, last_ping_at IS NOT NULL FROM checks_check WHERE name = %s",
        (name,),
    )
    return row


def pings(database_url, name):
    return query(
        database_url,
        "SELECT p.kind, p.exit_status, p.body FROM checks_ping p "
        "JOIN checks_check c ON c.id = p.subject_id WHERE c.name = %s ORDER BY p.n",
        (name,),
    )


def test_imported_checks_applied_and_wrapped_lines_ping_them(server, e2e_database, tmp_path):
    crontab = tmp_path / "web1.crontab"
    crontab.write_text(CRONTAB)
    args = ["import_crontab", "--checks", str(crontab), "--host", "web1", "--timezone", "UTC"]

    imported = manage(e2e_database, *args)
    document = yaml.safe_load(imported.stdout)
    names = [check["name"] for check in document["checks"]]
    assert names == ["web1-printf-queue-s-n", "web1-echo-disk-full"]
    assert len(imported.stderr.splitlines()) == 5
    (tmp_path / "web1.yaml").write_text(imported.stdout)
    manage(e2e_database, "apply", str(tmp_path / "web1.yaml"))
    assert [check_row(e2e_database, name) for name in names] == [("new", 0), ("new", 0)]

    wrapped = manage(e2e_database, *args, "--wrap", CRONIQ_PUBLIC_URL=server.url)
    lines = wrapped.stdout.split("\n")
    original = CRONTAB.split("\n")
    assert [n for n, (a, b) in enumerate(zip(original, lines, strict=True)) if a != b] == [4, 5]
    assert all(f"--server {server.url} -- /bin/sh -c '" in lines[n] for n in (4, 5))
    [(token,)] = query(e2e_database, "SELECT token FROM checks_check WHERE name = %s", (names[0],))
    assert f"--check={token} " in lines[4]

    good = run_as_cron(lines[4], tmp_path)
    assert (good.returncode, good.stdout, good.stderr) == (0, b"queue: empty\n", b"it's fine\n")
    bad = run_as_cron(lines[5], tmp_path)
    assert (bad.returncode, bad.stdout, bad.stderr) == (3, b"disk full\n", b"")

    [start, success] = pings(e2e_database, names[0])
    assert start == ("start", None, "")
    assert success[:2] == ("success", None)
    assert sorted(success[2].splitlines()) == ["it's fine", "queue: empty"]
    assert pings(e2e_database, names[1]) == [("start", None, ""), ("exit", 3, "disk full\n")]
    assert [check_row(e2e_database, name) for name in names] == [("up", 1), ("down", 1)]
