"""`croniq-admin import_crontab` (docs/design.md §13): the server's side of
the crontab import, the same document `croniq-runner discover` prints."""

import io
import subprocess
import sys

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from croniq_runner import discover

CRONTAB = """\
SHELL=/bin/bash
MAILTO=ops@example.com
CRON_TZ=Europe/Berlin
*/5 * * * * /usr/local/bin/check-queue.sh >/dev/null 2>&1
0 8 * * mon mail -s "Weekly \\% report" team@example.com%Hello,%%bye
@reboot /usr/local/bin/start-tunnel.sh
61 * * * * broken
"""


def import_crontab(*args, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    call_command("import_crontab", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_the_document_on_stdout_and_the_report_on_stderr(tmp_path):
    path = tmp_path / "web1.cron"
    path.write_text(CRONTAB)
    out, err = import_crontab(str(path), "--host", "web1", "--timezone", "UTC")
    document = yaml.safe_load(out)
    assert [job["name"] for job in document["jobs"]] == [
        "web1-check-queue-sh",
        "web1-mail-s-weekly-report-team-example-com",
        "web1-start-tunnel-sh",
    ]
    assert document["jobs"][1]["stdin"] == "Hello,\n\nbye"
    assert document["jobs"][2]["run_on_register"] is True
    assert err.splitlines()[-1] == f"{path}:7: skipped: minute field: 61 is out of range 0-59"
    assert len(err.splitlines()) == 7


def test_it_prints_what_discover_prints_for_the_same_crontab_byte_for_byte(tmp_path, capsys):
    path = tmp_path / "saved"
    path.write_text(CRONTAB)
    args = ["--host", "web1", "--timezone", "America/Denver"]
    server = import_crontab(str(path), "--source", "crontab -l", *args)

    def crontab_l(argv, **kwargs):
        return subprocess.CompletedProcess(argv, 0, CRONTAB.encode(), b"")

    assert discover.main(args, run=crontab_l) == 0
    assert capsys.readouterr() == server


def test_several_files_system_and_stdin(tmp_path, monkeypatch):
    (tmp_path / "crontab").write_text("17 * * * * root cd / && run-parts /etc/cron.hourly\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"0 1 * * * backup x\n")))
    out, err = import_crontab(str(tmp_path / "crontab"), "-", "--system", "--timezone", "UTC")
    jobs = yaml.safe_load(out)["jobs"]
    assert [(j["name"], j["run_as"]) for j in jobs] == [
        ("run-parts-cron-hourly", "root"),
        ("x", "backup"),
    ]
    assert err.splitlines()[1] == "-:1: job x"


def test_bytes_that_are_not_utf8_are_replaced_and_the_line_still_reported(tmp_path):
    path = tmp_path / "latin1"
    path.write_bytes(b"0 1 * * * echo caf\xe9\n")
    out, _ = import_crontab(str(path), "--timezone", "UTC")
    assert yaml.safe_load(out)["jobs"][0]["command"] == "echo caf\ufffd"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/crontab"], "/no/such/crontab: No such file or directory"),
        (["a", "b", "--source", "x"], "--source names one file: give one FILE with it"),
        (["-", "--timezone", "Mars/Olympus"], "timezone: 'Mars/Olympus' is not an IANA timezone"),
        (["-", "--host", "!!"], "host: '!!' has no letters or digits"),
    ],
)
def test_bad_input_is_refused_naming_it(args, message, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(CommandError, match=message):
        import_crontab(*args)


def test_its_document_applies(tmp_path, db):
    """What the document holds that apply knows today goes in whole: the
    jobs, the email channel and its job.failing rule."""
    path = tmp_path / "plain"
    path.write_text(
        "PATH=/usr/bin:/bin\nMAILTO=ops@example.com\nCRON_TZ=Europe/Berlin\n"
        "*/5 * * * * check-queue.sh\n30 2 * * 1-5 backup.sh --full\n"
    )
    out, _ = import_crontab(str(path), "--host", "web1", "--timezone", "UTC")
    document = tmp_path / "web1.yaml"
    document.write_text(out)
    call_command("apply", str(document), stdout=io.StringIO(), stderr=io.StringIO())
    from notifications.models import Channel, Rule
    from scheduler.models import Job

    job = Job.objects.get(name="web1-backup-sh-full")
    assert (job.schedule, job.timezone, job.labels, job.owner) == (
        "30 2 * * 1-5",
        "Europe/Berlin",
        ["host:web1"],
        "ops@example.com",
    )
    assert job.env == {"PATH": "/usr/bin:/bin"}
    assert Channel.objects.get(name="mailto-ops-example-com").kind == "email"
    assert Rule.objects.get(name="mailto-ops-example-com").owner == "ops@example.com"
    # Applying the same document again changes nothing.
    again = io.StringIO()
    call_command("apply", str(document), "--dry-run", stdout=again, stderr=io.StringIO())
    assert again.getvalue() == "nothing to change: everything is as the file says\n"


def test_stdin_reboot_and_run_as_apply_as_job_fields(tmp_path, db):
    """The fields a crontab needs beyond a plain job (docs/design.md §13):
    `%` input, @reboot without a schedule, a system crontab's user."""
    path = tmp_path / "crontab"
    path.write_text(
        "0 8 * * mon backup mail -s report team@example.com%Hi,%%bye\n"
        "@reboot root /usr/local/bin/start-tunnel.sh\n"
    )
    out, _ = import_crontab(str(path), "--system", "--host", "db1", "--timezone", "UTC")
    document = tmp_path / "db1.yaml"
    document.write_text(out)
    call_command("apply", str(document), stdout=io.StringIO(), stderr=io.StringIO())
    from scheduler.models import Job

    mail = Job.objects.get(name="db1-mail-s-report-team-example-com")
    assert (mail.command, mail.stdin, mail.run_as) == (
        "mail -s report team@example.com",
        "Hi,\n\nbye",
        "backup",
    )
    tunnel = Job.objects.get(name="db1-start-tunnel-sh")
    assert (tunnel.schedule, tunnel.run_on_register, tunnel.run_as) == ("", True, "root")
    assert tunnel.next_run_at is None  # it runs when a runner starts, never on a clock


# -- --checks and --wrap: watch the lines first (docs/design.md §13) -----------

WATCHED = """\
# deploy's crontab
SHELL=/bin/bash
CRON_TZ=Europe/Berlin

*/5 * * * * /usr/local/bin/check-queue.sh >/dev/null 2>&1
0 8 * * mon mail -s "it's \\% done" team@example.com%Hello,%%bye
@reboot /usr/local/bin/start-tunnel.sh
"""


def test_checks_prints_a_checks_document_and_its_report(tmp_path):
    path = tmp_path / "web1.cron"
    path.write_text(WATCHED)
    out, err = import_crontab("--checks", str(path), "--host", "web1", "--timezone", "UTC")
    document = yaml.safe_load(out)
    assert list(document) == ["checks"]
    assert [(c["name"], c["timezone"], c["labels"]) for c in document["checks"]] == [
        ("web1-check-queue-sh", "Europe/Berlin", ["host:web1"]),
        ("web1-mail-s-it-s-done-team-example-com", "Europe/Berlin", ["host:web1"]),
    ]
    assert err.splitlines()[-1] == (
        f"{path}:7: skipped: @reboot has no schedule to watch: no check (import it as a job, "
        "which runs when its runner starts)"
    )
    assert import_crontab("--checks", str(path), "--host", "web1", "--timezone", "UTC") == (
        out,
        err,
    )


def test_the_checks_document_applies_and_wrap_pings_their_tokens(tmp_path, db, settings):
    settings.CRONIQ_PUBLIC_URL = "https://croniq.example.com"
    path = tmp_path / "web1.cron"
    path.write_text(WATCHED)
    args = [str(path), "--host", "web1", "--timezone", "UTC"]
    out, _ = import_crontab("--checks", *args)
    document = tmp_path / "web1.yaml"
    document.write_text(out)
    call_command("apply", str(document), stdout=io.StringIO(), stderr=io.StringIO())
    from checks.models import Check

    queue = Check.objects.get(name="web1-check-queue-sh")
    assert (queue.schedule, queue.timezone, queue.grace, queue.labels) == (
        "*/5 * * * *",
        "Europe/Berlin",
        60,
        ["host:web1"],
    )
    assert queue.token not in out

    text, err = import_crontab("--checks", "--wrap", *args)
    mail = Check.objects.get(name="web1-mail-s-it-s-done-team-example-com")
    head = "croniq-runner wrap --check={} --server https://croniq.example.com -- /bin/bash -c "
    lines = WATCHED.split("\n")
    lines[4] = (
        f"*/5 * * * * {head.format(queue.token)}'/usr/local/bin/check-queue.sh >/dev/null 2>&1'"
    )
    lines[5] = (
        f"0 8 * * mon {head.format(mail.token)}"
        "'mail -s \"it'\\''s \\% done\" team@example.com'%Hello,%%bye"
    )
    assert text == "\n".join(lines)
    assert err.splitlines() == [
        f"{path}:2: SHELL=/bin/bash: cron's, not a check's (the crontab keeps it)",
        f"{path}:3: CRON_TZ=Europe/Berlin: the checks below expect their pings in Europe/Berlin",
        f"{path}:5: wrapped: pings check web1-check-queue-sh",
        f"{path}:6: wrapped: pings check web1-mail-s-it-s-done-team-example-com",
        f"{path}:7: skipped: @reboot has no schedule to watch: no check (import it as a job, "
        "which runs when its runner starts)",
    ]


def test_wrap_before_apply_leaves_the_lines_and_says_so(tmp_path, db):
    path = tmp_path / "web1.cron"
    path.write_text(WATCHED)
    text, err = import_crontab("--checks", "--wrap", str(path), "--timezone", "UTC")
    assert text == WATCHED
    assert err.splitlines()[2] == (
        f"{path}:5: skipped: check check-queue-sh does not exist yet: apply the checks "
        "document first (line left as it was)"
    )


def test_wrap_takes_the_runner_path(tmp_path, db):
    from checks.models import Check

    Check.objects.create(name="x", schedule="0 1 * * *")
    path = tmp_path / "c"
    path.write_text("0 1 * * * x\n")
    text, _ = import_crontab(
        "--checks",
        "--wrap",
        str(path),
        "--timezone",
        "UTC",
        "--runner-path",
        "/opt/cr/bin/croniq-runner",
    )
    assert text.startswith("0 1 * * * /opt/cr/bin/croniq-runner wrap --check=")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--wrap", "a"], "--wrap goes with --checks"),
        (["--checks", "--wrap", "a", "b"], "--wrap prints one crontab: give one FILE with it"),
    ],
)
def test_wrap_is_refused_without_checks_or_with_several_files(args, message):
    with pytest.raises(CommandError, match=message):
        import_crontab(*args)


def test_wrap_refuses_a_file_it_could_not_print_back(tmp_path):
    path = tmp_path / "latin1"
    path.write_bytes(b"0 1 * * * echo caf\xe9\n")
    with pytest.raises(CommandError, match="not UTF-8 text: --wrap could not print"):
        import_crontab("--checks", "--wrap", str(path), "--timezone", "UTC")
