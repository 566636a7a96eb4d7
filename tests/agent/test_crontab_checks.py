"""Crontab lines as checks (docs/design.md §13): `import_crontabs(...,
checks=True)`, the wrapped crontab `wrap_crontab` writes around the checks'
tokens, and that a wrapped line, run as cron runs it, runs the command the
line ran before and pings its check."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from croniq_runner import discover
from croniq_runner.crontab import (
    Crontab,
    blank_split,
    import_crontabs,
    input_at,
    render,
    split_percent,
    wrap_command,
    wrap_crontab,
)
from tests.agent.test_wrap import PingServer

CRONTAB = textwrap.dedent(
    """\
    # deploy's crontab
    SHELL=/bin/bash
    PATH=/usr/local/bin:/usr/bin:/bin
    MAILTO=ops@example.com
    CRON_TZ=Europe/Berlin

    */5 * * * * /srv/app/bin/check-queue.sh >/dev/null 2>&1
    @reboot /usr/local/bin/start-tunnel.sh
    15 4 1 * * /srv/app/bin/invoice-run --month=$(date +\\%Y-\\%m)
    0 8 * * mon mail -s "Weekly report" team@example.com%Hello,%%bye
    -*/10 * * * * /usr/lib/sysstat/sa1 1 1
    61 * * * * broken
    """
)


def checks_of(text=CRONTAB, source="crontab -l", **options):
    options = {"timezone": "UTC", "host": "web1", **options}
    return import_crontabs([Crontab(source, text)], checks=True, **options)


def test_each_line_with_a_schedule_becomes_a_check():
    imported = checks_of()
    document = yaml.safe_load(render(imported))
    assert list(document) == ["checks"]
    assert document["checks"][0] == {
        "name": "web1-check-queue-sh",
        "description": "crontab -l line 7: */5 * * * * /srv/app/bin/check-queue.sh >/dev/null 2>&1",
        "schedule": "*/5 * * * *",
        "timezone": "Europe/Berlin",
        "grace": "1m",
        "labels": ["host:web1"],
    }
    assert [(c["name"], c["schedule"]) for c in document["checks"]] == [
        ("web1-check-queue-sh", "*/5 * * * *"),
        ("web1-invoice-run-month", "15 4 1 * *"),
        ("web1-mail-s-weekly-report-team-example-com", "0 8 * * mon"),
        ("web1-sa1-1-1", "*/10 * * * *"),  # cron's '-' (no syslog line) changes nothing here
    ]


def test_without_a_host_no_labels_and_the_timezone_as_the_job_would_get():
    imported = checks_of("0 1 * * * backup.sh\n", host=None, timezone="Asia/Tokyo")
    [check] = imported.document["checks"]
    assert check == {
        "name": "backup-sh",
        "description": "crontab -l line 1: 0 1 * * * backup.sh",
        "schedule": "0 1 * * *",
        "timezone": "Asia/Tokyo",
        "grace": "1m",
    }


def test_the_report_has_a_line_for_every_line_but_blanks_and_comments():
    assert checks_of().report_text().splitlines() == [
        "crontab -l:2: SHELL=/bin/bash: cron's, not a check's (the crontab keeps it)",
        "crontab -l:3: PATH=/usr/local/bin:/usr/bin:/bin: cron's, not a check's "
        "(the crontab keeps it)",
        "crontab -l:4: MAILTO=ops@example.com: cron's, not a check's (the crontab keeps it)",
        "crontab -l:5: CRON_TZ=Europe/Berlin: the checks below expect their pings in Europe/Berlin",
        "crontab -l:7: check web1-check-queue-sh",
        "crontab -l:8: skipped: @reboot has no schedule to watch: no check (import it as a "
        "job, which runs when its runner starts)",
        "crontab -l:9: check web1-invoice-run-month",
        "crontab -l:10: check web1-mail-s-weekly-report-team-example-com",
        "crontab -l:11: check web1-sa1-1-1",
        "crontab -l:12: skipped: minute field: 61 is out of range 0-59",
    ]


def test_an_unknown_timezone_skips_the_checks_below_it():
    imported = checks_of("TZ=Mars/Olympus\n0 1 * * * a.sh\nTZ=UTC\n0 2 * * * b.sh\n")
    assert [c["name"] for c in imported.document["checks"]] == ["web1-b-sh"]
    assert imported.report_text().splitlines()[:2] == [
        "crontab -l:1: TZ=Mars/Olympus: the checks below are skipped: unknown timezone "
        "Mars/Olympus",
        "crontab -l:2: skipped: TZ=Mars/Olympus (line 1) is not an IANA timezone",
    ]


def test_a_check_has_the_name_the_lines_job_gets():
    """@reboot lines take their job's name too, so a check and the job that
    later replaces it have one name."""
    text = "@reboot sync.sh\n0 * * * * sync.sh\n0 * * * * sync.sh --all\n*/5 * * * * sync.sh\n"
    jobs = import_crontabs([Crontab("f", text)], timezone="UTC").document["jobs"]
    checks = checks_of(text, source="f", host=None).document["checks"]
    by_line = {job["description"]: job["name"] for job in jobs}
    assert [(c["description"], c["name"]) for c in checks] == [
        (d, by_line[d]) for d in list(by_line)[1:]
    ]
    assert checks[0]["name"].startswith("sync-sh-")  # the @reboot line's job is sync-sh


@pytest.mark.parametrize("checks", [True, False])
def test_a_line_already_wrapped_is_not_imported_its_token_kept_out(checks):
    text = (
        "0 1 * * * croniq-runner wrap --check SECRET --server https://c.example -- x\n"
        "0 2 * * * cd /srv && nice -n 5 /opt/bin/croniq-runner wrap --check SECRET2 -- y\n"
        "0 3 * * * echo croniq-runner wrap\n"
    )
    imported = import_crontabs([Crontab("f", text)], timezone="UTC", checks=checks)
    assert "SECRET" not in render(imported)
    assert [entry.skipped for entry in imported.report] == [True, True, False]
    assert imported.report[0].outcome == (
        "already runs under croniq-runner wrap, with a check's token: import the line from "
        "before it was wrapped (a token stays out of documents)"
    )


def test_the_same_input_gives_the_same_bytes_and_jobs_are_unchanged():
    assert render(checks_of()) == render(checks_of())
    assert "checks" not in import_crontabs([Crontab("f", CRONTAB)], timezone="UTC").document


def test_discover_checks_prints_what_the_import_prints(capsys):
    def crontab_l(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, CRONTAB.encode(), b"")

    assert discover.main(["--checks", "--host", "web1", "--timezone", "UTC"], run=crontab_l) == 0
    imported = checks_of()
    assert capsys.readouterr() == (render(imported), imported.report_text())


# -- the wrapped crontab ------------------------------------------------------

SERVER = "https://croniq.example.com"


def wrapped(text=CRONTAB, tokens=None, **options):
    imported = checks_of(text, **options)
    tokens = {check["name"]: f"tok-{n}" for n, check in enumerate(imported.document["checks"])}
    return wrap_crontab(Crontab("crontab -l", text), imported, tokens, SERVER)


def test_watched_lines_run_under_wrap_and_every_other_line_is_kept():
    text, report = wrapped()
    before, after = CRONTAB.split("\n"), text.split("\n")
    changed = [n for n, (a, b) in enumerate(zip(before, after, strict=True), 1) if a != b]
    assert changed == [7, 9, 10, 11]
    head = f"croniq-runner wrap --check=tok-{{}} --server {SERVER} -- /bin/bash -c "
    assert (
        after[6]
        == "*/5 * * * * " + head.format(0) + "'/srv/app/bin/check-queue.sh >/dev/null 2>&1'"
    )
    assert (
        after[8]
        == "15 4 1 * * " + head.format(1) + "'/srv/app/bin/invoice-run --month=$(date +\\%Y-\\%m)'"
    )
    # The `%` input stays outside the quotes, where cron reads it.
    assert after[9] == (
        "0 8 * * mon " + head.format(2) + "'mail -s \"Weekly report\" team@example.com'%Hello,%%bye"
    )
    assert after[10] == "-*/10 * * * * " + head.format(3) + "'/usr/lib/sysstat/sa1 1 1'"
    assert [str(entry) for entry in report][4:7] == [
        "crontab -l:7: wrapped: pings check web1-check-queue-sh",
        "crontab -l:8: skipped: @reboot has no schedule to watch: no check (import it as a "
        "job, which runs when its runner starts)",
        "crontab -l:9: wrapped: pings check web1-invoice-run-month",
    ]


def test_a_system_crontab_keeps_the_user_field_and_crlf_ends():
    text = "PATH=/bin\r\n17 * * * *\troot  cd / && run-parts /etc/cron.hourly\r\n"
    imported = checks_of(text, system=True)
    out, _ = wrap_crontab(
        Crontab("crontab -l", text), imported, {"web1-run-parts-cron-hourly": "t"}, SERVER
    )
    assert out == (
        "PATH=/bin\r\n17 * * * *\troot  croniq-runner wrap --check=t --server "
        f"{SERVER} -- /bin/sh -c 'cd / && run-parts /etc/cron.hourly'\r\n"
    )


def test_a_line_whose_check_does_not_exist_yet_is_left_as_it_was():
    imported = checks_of()
    out, report = wrap_crontab(
        Crontab("crontab -l", CRONTAB), imported, {"web1-check-queue-sh": "t"}, SERVER
    )
    assert out.split("\n")[8:] == CRONTAB.split("\n")[8:]
    assert str(report[6]) == (
        "crontab -l:9: skipped: check web1-invoice-run-month does not exist yet: apply the "
        "checks document first (line left as it was)"
    )
    assert len(report) == len(imported.report)


def test_wrapping_a_wrapped_crontab_changes_nothing():
    text, _ = wrapped()
    again = import_crontabs([Crontab("crontab -l", text)], timezone="UTC", host="web1", checks=True)
    assert wrap_crontab(Crontab("crontab -l", text), again, {"x": "y"}, SERVER)[0] == text


def test_words_before_the_command_are_quoted_and_their_percent_escaped():
    head = wrap_command("a%b", "https://c.example/x y", "/bin/my shell", "/opt/croniq runner")
    assert head == (
        "'/opt/croniq runner' wrap --check=a\\%b --server 'https://c.example/x y' -- "
        "'/bin/my shell' -c "
    )
    with pytest.raises(ValueError, match="backslash before a %"):
        wrap_command("t", "https://c.example/\\%", "/bin/sh")


@given(st.text(alphabet="ab\\%' ", max_size=12))
def test_input_at_is_where_split_percent_ends_the_command(text):
    command, stdin = split_percent(text)
    at = input_at(text)
    assert (at < len(text)) == (stdin is not None)
    assert split_percent(text[:at]) == (command, None)


# -- a wrapped line, run as cron runs it --------------------------------------

# A line with what the shell and cron make hard: quotes of both kinds, `\%`,
# `$(...)`, redirections, a backslash, and `%` input.
TRICKY = (
    r"""printf '\%s|\%s\n' "it's" "$(echo sub shell)" > out.txt; """
    r"""echo "a \% b" 'c'"'"'d' 'back\slash' 2>&1 >> out.txt; cat >> out.txt; """
    r"""echo done; echo to-stderr >&2%line one%line \% two"""
)


def run_as_cron(line, env, cwd):
    """What cron does with a user crontab's line: the command after the five
    fields, cut at `%` into the command and its input, run by `sh -c`."""
    command, stdin = split_percent(blank_split(line, 5)[5])
    return subprocess.run(
        ["/bin/sh", "-c", command],
        input=(stdin or "").encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


@pytest.mark.parametrize(("command", "status"), [(TRICKY, 0), ("echo failing; exit 3", 3)])
def test_a_wrapped_line_runs_the_lines_command_and_pings(tmp_path, command, status):
    line = f"*/5 * * * * {command}"
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update({k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL")})
    (tmp_path / "plain").mkdir()
    (tmp_path / "wrapped").mkdir()
    plain = run_as_cron(line, env, tmp_path / "plain")

    ping_server = PingServer()
    try:
        imported = checks_of(line)
        [check] = imported.document["checks"]
        text, _ = wrap_crontab(
            Crontab("crontab -l", line), imported, {check["name"]: "tok"}, ping_server.url
        )
        assert text != line
        done = run_as_cron(text, env, tmp_path / "wrapped")
    finally:
        ping_server.close()

    assert (done.returncode, done.stdout, done.stderr) == (
        plain.returncode,
        plain.stdout,
        plain.stderr,
    )
    assert done.returncode == status
    if command == TRICKY:
        assert (tmp_path / "wrapped" / "out.txt").read_bytes() == (
            tmp_path / "plain" / "out.txt"
        ).read_bytes()
        assert (tmp_path / "plain" / "out.txt").read_text() == (
            "it's|sub shell\na % b c'd back\\slash\nline one\nline % two"
        )
    ending = "/ping/tok" if status == 0 else f"/ping/tok/{status}"
    assert ping_server.paths == ["/ping/tok/start", ending]
    # The output's tail, both streams (as they arrived: their order may differ).
    body = ping_server.requests[1][2]
    assert sorted(body.splitlines()) == sorted((plain.stdout + plain.stderr).splitlines())


def test_a_token_that_begins_with_a_dash_is_still_the_checks(tmp_path):
    """Tokens are token_urlsafe: one in 64 begins with "-", which after a
    separate `--check` argparse reads as an option (the wrapped line then
    failed with a usage error and ran nothing)."""
    import shlex

    from croniq_runner import wrap
    from croniq_runner.crontab import wrap_command

    words = shlex.split(wrap_command("-Xy_z", "https://c.example", "/bin/sh") + "'true'")
    assert words[:3] == ["croniq-runner", "wrap", "--check=-Xy_z"]
    args = wrap.build_parser().parse_args(words[2:])
    assert (args.check, args.server) == ("-Xy_z", "https://c.example")
