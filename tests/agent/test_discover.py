"""`croniq-runner discover` (docs/design.md §13): this machine's crontabs as
an apply document, and the subcommands beside the agent's flags."""

import os
import socket
import subprocess
import sys

import yaml

from croniq_runner import discover
from croniq_runner.agent import EXIT_USAGE
from croniq_runner.agent import main as agent_main

CRONTAB = b"""\
# m h dom mon dow command
MAILTO=ops@example.com
*/5 * * * * /usr/local/bin/check-queue.sh
61 * * * * broken
"""


def crontab_l(stdout=CRONTAB, returncode=0, stderr=b""):
    calls = []

    def run(args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, returncode, stdout, stderr)

    run.calls = calls
    return run


def test_it_prints_the_users_crontab_as_a_document_and_the_report(capsys):
    run = crontab_l()
    assert discover.main(["--host", "web1", "--timezone", "Europe/Berlin"], run=run) == 0
    assert run.calls == [["crontab", "-l"]]
    out, err = capsys.readouterr()
    document = yaml.safe_load(out)
    [job] = document["jobs"]
    assert job["name"] == "web1-check-queue-sh"
    assert job["labels"] == ["host:web1"]
    assert job["timezone"] == "Europe/Berlin"
    assert job["description"] == "crontab -l line 3: */5 * * * * /usr/local/bin/check-queue.sh"
    assert document["channels"][0]["to"] == ["ops@example.com"]
    assert err.splitlines() == [
        "crontab -l:2: MAILTO=ops@example.com: channel mailto-ops-example-com and a "
        "job.failing rule mailto-ops-example-com for the jobs below (their owner: "
        "ops@example.com)",
        "crontab -l:3: job web1-check-queue-sh",
        "crontab -l:4: skipped: minute field: 61 is out of range 0-59",
    ]


def test_the_host_label_defaults_to_the_machines_short_hostname(capsys, monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "db2.prod.example.com")
    assert discover.main(["--timezone", "UTC"], run=crontab_l()) == 0
    [job] = yaml.safe_load(capsys.readouterr().out)["jobs"]
    assert job["labels"] == ["host:db2"]


def test_the_timezone_defaults_to_the_machines(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TZ", raising=False)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "timezone").write_text("Asia/Tokyo\n")
    assert discover.main(["--host", "h"], run=crontab_l(), root=str(tmp_path)) == 0
    [job] = yaml.safe_load(capsys.readouterr().out)["jobs"]
    assert job["timezone"] == "Asia/Tokyo"


def test_a_user_without_a_crontab_gets_an_empty_document(capsys):
    run = crontab_l(b"", 1, b"no crontab for alice\n")
    assert discover.main(["--host", "h", "--timezone", "UTC"], run=run) == 0
    out, err = capsys.readouterr()
    assert yaml.safe_load(out) == {"jobs": []}
    assert err == "croniq-runner discover: this user has no crontab\n"


def test_a_failing_crontab_command_exits_1_naming_it(capsys):
    run = crontab_l(b"", 1, b"crontab: must be privileged\n")
    assert discover.main(["--host", "h", "--timezone", "UTC"], run=run) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert (
        err == "croniq-runner discover: error: crontab -l exited 1: crontab: must be privileged\n"
    )


def test_bad_flags_exit_2_naming_them(capsys):
    assert discover.main(["--timezone", "Mars/Olympus"], run=crontab_l()) == 2
    assert "timezone: 'Mars/Olympus' is not an IANA timezone" in capsys.readouterr().err
    assert discover.main(["--bogus"], run=crontab_l()) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def system_root(tmp_path):
    etc = tmp_path / "etc"
    (etc / "cron.d").mkdir(parents=True)
    (etc / "crontab").write_text(
        "SHELL=/bin/sh\n17 * * * * root cd / && run-parts --report /etc/cron.hourly\n"
    )
    (etc / "cron.d" / "php").write_text(
        "09,39 * * * * www-data [ -x /usr/lib/php/sessionclean ] && /usr/lib/php/sessionclean\n"
    )
    (etc / "cron.d" / "certbot").write_text("0 */12 * * * root certbot -q renew\n")
    (etc / "cron.d" / "certbot.dpkg-old").write_text("0 0 * * * root old\n")
    (etc / "cron.d" / ".placeholder").write_text("")
    return tmp_path


def test_system_reads_etc_crontab_and_cron_d_with_their_users(capsys, tmp_path):
    root = system_root(tmp_path)
    assert discover.main(["--system", "--host", "h", "--timezone", "UTC"], root=str(root)) == 0
    out, err = capsys.readouterr()
    jobs = yaml.safe_load(out)["jobs"]
    assert [(j["name"], j["run_as"]) for j in jobs] == [
        ("h-run-parts-report-cron-hourly", "root"),
        ("h-certbot-q-renew", "root"),
        ("h-sessionclean", "www-data"),
    ]
    assert jobs[0]["env"] == {"SHELL": "/bin/sh"}
    assert "env" not in jobs[1]  # each file starts afresh
    assert err.splitlines() == [
        "/etc/cron.d/.placeholder: skipped: cron reads only files named with letters, "
        "digits, '_' and '-'",
        "/etc/cron.d/certbot.dpkg-old: skipped: cron reads only files named with letters, "
        "digits, '_' and '-'",
        "/etc/crontab:1: SHELL=/bin/sh: env of the jobs below",
        "/etc/crontab:2: job h-run-parts-report-cron-hourly",
        "/etc/cron.d/certbot:1: job h-certbot-q-renew",
        "/etc/cron.d/php:1: job h-sessionclean",
    ]


def test_an_unreadable_cron_d_file_is_reported_and_the_rest_read(capsys, tmp_path, monkeypatch):
    root = system_root(tmp_path)
    read = discover._read

    def unreadable_php(path):
        if path.endswith("/php"):
            raise PermissionError(13, "Permission denied")  # as for a user, even under root
        return read(path)

    monkeypatch.setattr(discover, "_read", unreadable_php)
    assert discover.main(["--system", "--host", "h", "--timezone", "UTC"], root=str(root)) == 0
    out, err = capsys.readouterr()
    assert len(yaml.safe_load(out)["jobs"]) == 2
    assert "/etc/cron.d/php: skipped: cannot read it: Permission denied" in err.splitlines()


def test_croniq_runner_discover_runs_crontab_l_from_the_path(tmp_path):
    """The installed command, as an operator runs it: a subcommand of croniq-runner."""
    (tmp_path / "crontab").write_text(f"#!/bin/sh\ncat {tmp_path / 'saved'}\n")
    (tmp_path / "crontab").chmod(0o755)
    (tmp_path / "saved").write_bytes(CRONTAB)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "croniq_runner.agent",
            "discover",
            "--host",
            "web1",
            "--timezone",
            "UTC",
        ],
        capture_output=True,
        env=env,
        timeout=60,
        check=True,
    )
    assert yaml.safe_load(done.stdout)["jobs"][0]["name"] == "web1-check-queue-sh"
    assert b"crontab -l:4: skipped" in done.stderr


def test_the_agents_flags_still_mean_what_they_meant(capsys):
    """Subcommands are first words only: an old invocation is unchanged."""
    assert agent_main(["--server", "http://croniq.test"]) == EXIT_USAGE
    assert "no token" in capsys.readouterr().err
    assert agent_main(["--server", "http://croniq.test", "--token", "t", "discover"]) == EXIT_USAGE
    assert "unrecognized arguments: discover" in capsys.readouterr().err
    assert agent_main(["discover", "--help"]) == 0
    assert "usage: croniq-runner discover" in capsys.readouterr().out
    assert agent_main(["wrap", "--help"]) == 0
    assert "usage: croniq-runner wrap --check=TOKEN" in capsys.readouterr().out
