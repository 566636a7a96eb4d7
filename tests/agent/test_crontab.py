"""The crontab importer (croniq_runner.crontab, docs/design.md §13): what each
line becomes, the report, and the YAML both commands print."""

import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from croniq_runner.crontab import (
    Crontab,
    command_slug,
    import_crontabs,
    machine_timezone,
    parse_assignment,
    render,
    split_percent,
    to_yaml,
)


def imported(text, **options):
    options.setdefault("timezone", "UTC")
    return import_crontabs([Crontab("crontab", textwrap.dedent(text))], **options)


def jobs(text, **options):
    return imported(text, **options).document["jobs"]


def only_job(text, **options):
    [job] = jobs(text, **options)
    return job


def reasons(text, **options):
    return {e.number: e.outcome for e in imported(text, **options).report if e.skipped}


# -- jobs ---------------------------------------------------------------------


def test_a_job_line_becomes_a_job_named_after_its_command():
    job = only_job("30 2 * * 1-5 /usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1\n")
    assert job == {
        "name": "backup-sh-full",
        "description": "crontab line 1: 30 2 * * 1-5 /usr/local/bin/backup.sh --full > "
        "/var/log/backup.log 2>&1",
        "schedule": "30 2 * * 1-5",
        "timezone": "UTC",
        "command": "/usr/local/bin/backup.sh --full > /var/log/backup.log 2>&1",
    }


def test_the_schedule_is_kept_as_written_names_and_steps_included():
    assert (
        only_job("*/15\t9-17 * jan-mar MON-fri  run\n")["schedule"] == "*/15 9-17 * jan-mar MON-fri"
    )
    assert only_job("@weekly run\n")["schedule"] == "@weekly"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("cd /srv/app && ./manage.py clearsessions", "manage-py-clearsessions"),
        (
            "test -x /usr/sbin/anacron || { cd / && run-parts --report /etc/cron.daily; }",
            "run-parts-report-cron-daily",
        ),
        ("nice -n 19 ionice -c3 find /tmp -mtime +7 -delete", "find-tmp-mtime-7-delete"),
        ("FOO=1 exec backup.sh>/dev/null", "backup-sh"),
        ("/usr/local/bin/check-queue.sh 2>&1 | logger -t queue", "check-queue-sh"),
        (">/dev/null", "job"),
        ("ÄÖÜ", "job"),
    ],
)
def test_job_names_say_what_the_command_does(command, name):
    assert command_slug(command) == name


def test_names_are_unique_and_do_not_move_when_lines_are_added_above():
    text = "0 1 * * * backup.sh\n0 2 * * * backup.sh\n0 2 * * * backup.sh\n"
    names = [job["name"] for job in jobs(text)]
    assert names[0] == "backup-sh"
    assert names[1].startswith("backup-sh-") and len(names[1]) == len("backup-sh-") + 8
    assert names[2] == names[1] + "-2"  # the same line again
    later = [job["name"] for job in jobs("0 5 * * * other\n" + text)]
    assert later[1:] == names
    assert len(set(names)) == 3


def test_the_same_input_gives_the_same_document_byte_for_byte():
    text = "MAILTO=a@example.com\nPATH=/bin\n0 1 * * * x\n0 1 * * * x\n@reboot y\n"
    assert render(imported(text, host="web1")) == render(imported(text, host="web1"))


def test_long_commands_give_names_within_the_slug_limit():
    job = only_job("0 1 * * * " + " ".join(["word"] * 60) + "\n", host="h" * 80)
    assert len(job["name"]) <= 100
    assert job["name"].startswith("h" * 30 + "-word-word")


def test_a_host_labels_every_job_and_starts_its_name():
    job = only_job("0 1 * * * backup.sh\n", host="web1.example.com")
    assert job["labels"] == ["host:web1.example.com"]
    assert job["name"] == "web1-example-com-backup-sh"


def test_a_system_crontab_gives_the_user_as_run_as():
    job = only_job("17 * * * * root cd / && run-parts --report /etc/cron.hourly\n", system=True)
    assert job["run_as"] == "root"
    assert job["command"] == "cd / && run-parts --report /etc/cron.hourly"
    assert "run_as" not in only_job("17 * * * * root x\n")  # a user crontab: root is the command


def test_a_system_crontab_line_without_a_user_and_command_is_skipped():
    assert reasons("0 1 * * * root\n@daily\n", system=True) == {
        1: "a system crontab's line needs a user and a command after the schedule",
        2: "a system crontab's line needs a user and a command after the schedule",
    }
    assert reasons("0 1 * * * -x cmd\n", system=True) == {1: "'-x' is not a user name"}


def test_reboot_runs_on_register_and_has_no_schedule():
    job = only_job("@reboot /usr/local/bin/start-tunnel.sh\n")
    assert job["run_on_register"] is True
    assert "schedule" not in job


# -- percent signs: standard input -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "command", "stdin"),
    [
        ("mail -s hi a@b%Hello,%%bye", "mail -s hi a@b", "Hello,\n\nbye"),
        ("date +\\%Y-\\%m-\\%d", "date +%Y-%m-%d", None),
        ("printf '100\\%'%50\\% off%", "printf '100%'", "50% off\n"),
        ("echo a\\\\%b", "echo a\\\\", "b"),  # an escaped backslash does not escape %
        ("echo a\\b%c\\d", "echo a\\b", "c\\d"),  # other backslashes stay
        ("cmd%", "cmd", ""),
        ("cmd%x\\", "cmd", "x\\"),
    ],
)
def test_percent_splits_command_and_standard_input_as_cron_does(text, command, stdin):
    assert split_percent(text) == (command, stdin)


def test_a_job_with_input_gets_stdin_and_an_empty_input_none():
    job = only_job('0 8 * * mon mail -s "Weekly \\% report" team@example.com%Hi%%bye\n')
    assert job["command"] == 'mail -s "Weekly % report" team@example.com'
    assert job["stdin"] == "Hi\n\nbye"
    assert "stdin" not in only_job("0 8 * * * cmd%\n")


# -- environment, timezone, mail --------------------------------------------------


@pytest.mark.parametrize(
    ("line", "assignment"),
    [
        ("PATH=/usr/bin:/bin", ("PATH", "/usr/bin:/bin")),
        ("  HOME = /srv/app  ", ("HOME", "/srv/app")),
        ('GREETING="hello  world" ', ("GREETING", "hello  world")),
        ("EMPTY=", ("EMPTY", "")),
        ("QUOTED=''", ("QUOTED", "")),
        ("X='a \"b\" c'", ("X", 'a "b" c')),
        ('"ODD NAME"=1', ("ODD NAME", "1")),
        ("EXPANDED=$HOME/bin", ("EXPANDED", "$HOME/bin")),  # cron expands nothing
        ("A==b", ("A", "=b")),
        ("0 1 * * * A=b cmd", None),
        ("@daily A=1 cmd", None),
    ],
)
def test_assignments_are_read_with_crons_quoting(line, assignment):
    assert parse_assignment(line) == assignment


def test_env_holds_the_assignments_above_each_job():
    text = """\
    SHELL=/bin/bash
    PATH=/usr/local/bin:/usr/bin
    0 1 * * * first
    HOME="/srv/app"
    PATH=/opt/bin
    0 2 * * * second
    """
    first, second = jobs(text)
    assert first["env"] == {"PATH": "/usr/local/bin:/usr/bin", "SHELL": "/bin/bash"}
    assert second["env"] == {"HOME": "/srv/app", "PATH": "/opt/bin", "SHELL": "/bin/bash"}


def test_each_file_starts_with_crons_defaults():
    result = import_crontabs(
        [
            Crontab("a", "PATH=/x\nMAILTO=a@example.com\n0 1 * * * a\n"),
            Crontab("b", "0 1 * * * b\n"),
        ],
        timezone="UTC",
    )
    second = result.document["jobs"][1]
    assert "env" not in second and "owner" not in second
    assert second["description"] == "b line 1: 0 1 * * * b"


def test_the_timezone_comes_from_the_last_cron_tz_or_tz_above():
    text = """\
    0 1 * * * a
    CRON_TZ=Europe/Berlin
    0 1 * * * b
    TZ=America/New_York
    0 1 * * * c
    CRON_TZ=Asia/Tokyo
    0 1 * * * d
    """
    zones = [job["timezone"] for job in jobs(text, timezone="Europe/Lisbon")]
    assert zones == ["Europe/Lisbon", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]
    envs = [job.get("env", {}) for job in jobs(text)]
    assert "CRON_TZ" not in envs[1] and envs[2] == {
        "TZ": "America/New_York"
    }  # the command reads TZ


def test_an_unknown_timezone_skips_the_jobs_below_it_until_a_known_one():
    text = "CRON_TZ=Mars/Olympus\n0 1 * * * a\nTZ=:Europe/Berlin\n0 1 * * * b\n"
    report = reasons(text)
    assert report == {2: "CRON_TZ=Mars/Olympus (line 1) is not an IANA timezone"}
    assert only_job(text)["timezone"] == "Europe/Berlin"


def test_mailto_gives_a_channel_and_a_failing_rule_for_the_jobs_below():
    text = """\
    0 1 * * * before
    MAILTO=ops@example.com
    0 2 * * * watched
    MAILTO=""
    0 3 * * * quiet
    MAILTO=dev@example.com, ops@example.com
    0 4 * * * both
    MAILTO=root
    0 5 * * * local
    """
    result = imported(text)
    owners = [job.get("owner") for job in result.document["jobs"]]
    assert owners == [None, "ops@example.com", None, "dev@example.com, ops@example.com", None]
    assert result.document["channels"] == [
        {
            "name": "mailto-dev-example-com-ops-example-com",
            "kind": "email",
            "to": ["dev@example.com", "ops@example.com"],
        },
        {"name": "mailto-ops-example-com", "kind": "email", "to": ["ops@example.com"]},
    ]
    assert result.document["notify"][1] == {
        "name": "mailto-ops-example-com",
        "events": ["job.failing"],
        "channels": ["mailto-ops-example-com"],
        "owner": "ops@example.com",
    }
    outcomes = {e.number: e.outcome for e in result.report}
    assert outcomes[4] == "MAILTO is empty: the jobs below send no mail"
    assert "root is a local mailbox" in outcomes[8]
    assert "env" not in result.document["jobs"][1]  # MAILTO steers cron's mail only


def test_no_mailto_no_channels_section():
    assert set(imported("0 1 * * * x\n").document) == {"jobs"}


# -- the report -------------------------------------------------------------------


def test_every_line_but_blanks_and_comments_is_reported_with_its_number():
    text = """\
    # m h dom mon dow command
    PATH=/bin

       # indented comment
    0 1 * * * backup.sh
    61 * * * * bad-minute
    0 24 * * * bad-hour
    0 0 0 * * bad-day
    0 0 * 13 * bad-month
    0 0 * * 8 bad-weekday
    0 0 * * * * *
    0 0 * *
    @every 5m x
    @Daily x
    -*/10 * * * * /usr/lib/sa/sa1 1 1
    */0 * * * * zero-step
    5-1 * * * * backwards
    0 0 * * L quartz
    0 0 1,,2 * * empty-item
    0 0 * * * %
    UNCLOSED="abc
    0 0 * * sat-sun weekend
    """
    result = imported(text)
    numbers = [entry.number for entry in result.report]
    assert numbers == [2, *range(5, 23)]
    skipped = {e.number: e.outcome for e in result.skipped}
    assert skipped == {
        6: "minute field: 61 is out of range 0-59",
        7: "hour field: 24 is out of range 0-23",
        8: "day-of-month field: 0 is out of range 1-31",
        9: "month field: 13 is out of range 1-12",
        10: "day-of-week field: 8 is out of range 0-7",
        12: "4 fields and no command: a job line has 5 schedule fields (minute hour "
        "day-of-month month day-of-week) and a command",
        13: "unknown macro '@every' (cron's: @reboot, @yearly, @annually, @monthly, "
        "@weekly, @daily, @midnight, @hourly)",
        14: "unknown macro '@Daily' (cron's: @reboot, @yearly, @annually, @monthly, "
        "@weekly, @daily, @midnight, @hourly)",
        15: "a '-' before the schedule (cron's 'do not log this job') has no Croniq "
        "counterpart: remove the '-' to import the job",
        16: "minute field: the step '0' is not a whole number of 1 or more",
        17: "minute field: the range '5-1' runs backwards",
        18: "day-of-week field: 'L' is not a number in 0-7 or a name (sun-sat)",
        19: "day-of-month field: an empty item",
        20: "no command",
        21: "UNCLOSED: the value's opening \" is never closed",
    }
    # `0 0 * * * * *`: six fields then `*` as the command: cron runs `* *`.
    assert 11 not in skipped
    assert {e.number: e.job for e in result.report if e.job} == {
        5: "backup-sh",
        11: "job",
        22: "weekend",
    }
    assert result.report[1].__str__() == "crontab:5: job backup-sh"
    assert str(result.skipped[0]) == "crontab:6: skipped: minute field: 61 is out of range 0-59"


def test_a_weekday_range_may_end_on_sunday_as_cronie_allows():
    assert only_job("0 9 * * mon-sun x\n")["schedule"] == "0 9 * * mon-sun"
    assert only_job("0 9 * * 5-0 x\n")["schedule"] == "0 9 * * 5-0"


def test_the_header_counts_skipped_lines():
    assert "1 line(s) skipped" in render(imported("61 * * * * x\n"))
    assert "skipped" not in render(imported("1 * * * * x\n"))


def test_bad_options_are_refused_naming_them():
    with pytest.raises(ValueError, match="timezone: 'Mars/Olympus' is not an IANA timezone"):
        imported("", timezone="Mars/Olympus")
    with pytest.raises(ValueError, match="host: '---'"):
        imported("", host="---")
    with pytest.raises(ValueError, match="host: 'web 1': a label holds no commas or blanks"):
        imported("", host="web 1")
    with pytest.raises(ValueError, match="host: 'a,b'"):
        imported("", host="a,b")


def test_the_machine_timezone_comes_from_tz_then_etc_timezone_then_localtime(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    assert machine_timezone({}, root=str(tmp_path)) == "UTC"
    (etc / "localtime").symlink_to("/usr/share/zoneinfo/Asia/Tokyo")
    assert machine_timezone({}, root=str(tmp_path)) == "Asia/Tokyo"
    (etc / "timezone").write_text("Europe/Berlin\n")
    assert machine_timezone({}, root=str(tmp_path)) == "Europe/Berlin"
    assert machine_timezone({"TZ": ":America/Denver"}, root=str(tmp_path)) == "America/Denver"
    assert machine_timezone({"TZ": "garbage"}, root=str(tmp_path)) == "Europe/Berlin"


# -- YAML -------------------------------------------------------------------------

NASTY = [
    "",
    " leading and trailing ",
    'she said "hi"',
    "it's",
    "a: b",
    "key: value # not a comment",
    "#comment",
    "- item",
    "yes",
    "No",
    "off",
    "null",
    "~",
    "true",
    "1e3",
    "0x1F",
    "012",
    "2026-12-05",
    "12:30",
    "line\nbreak",
    "tab\there",
    "cr\rhere",
    "back\\slash",
    "ümlaut and 日本語 and 😀",
    "nul\0byte",
    "bell\x07 del\x7f c1\x85 ls\u2028 ps\u2029 bom\ufeff",
    "{flow: mapping}",
    "[flow, list]",
    "&anchor *alias !tag |literal >folded %directive @at `tick`",
    "---",
    "...",
]


@pytest.mark.parametrize("text", NASTY)
def test_yaml_reads_every_string_back_as_written(text):
    document = {"jobs": [{"name": text, "env": {text or "E": text}, "labels": [text]}]}
    assert yaml.safe_load(to_yaml(document)) == document


def test_yaml_keys_that_yaml_would_read_as_something_else_are_quoted():
    document = {"env": {"yes": "1", "NO": "2", "PATH": "3", "1": "4", "a b": "5"}}
    text = to_yaml(document)
    assert '"yes": "1"' in text and '"NO": "2"' in text and "PATH: " in text
    assert yaml.safe_load(text) == document


def test_yaml_writes_booleans_numbers_null_and_empty_collections():
    document = {"a": True, "b": False, "c": 3, "d": None, "e": {}, "f": [], "g": [{"x": []}]}
    assert yaml.safe_load(to_yaml(document)) == document


def test_yaml_refuses_what_it_cannot_write():
    with pytest.raises(TypeError, match="float"):
        to_yaml({"a": 1.5})


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.text(min_size=1),
        st.one_of(st.text(), st.lists(st.text()), st.dictionaries(st.text(), st.text())),
        max_size=4,
    )
)
def test_yaml_round_trips_any_text(mapping):
    document = {"jobs": [mapping]} if mapping else {"jobs": []}
    assert yaml.safe_load(to_yaml(document)) == document


def test_a_whole_document_reads_back_as_the_dict():
    text = """\
    SHELL=/bin/bash
    MAILTO=ops@example.com
    CRON_TZ=Europe/Berlin
    */5 * * * * echo "a: b # c" >> /tmp/x
    0 8 * * mon mail -s 'yes' x@example.com%no%null
    @reboot start.sh
    """
    result = imported(text, host="web1", system=False)
    assert yaml.safe_load(render(result)) == result.document


def test_fields_are_separated_by_spaces_and_tabs_only_and_numbers_are_ascii():
    assert reasons("0\u00a01 * * * * x\n") == {1: "minute field: '0\\xa01' is not a number in 0-59"}
    assert reasons("\u0663 * * * * x\n") == {1: "minute field: '\u0663' is not a number in 0-59"}
    assert reasons("\u00a0\n") == {
        1: "1 fields and no command: a job line has 5 schedule fields (minute hour "
        "day-of-month month day-of-week) and a command"
    }


def test_the_command_keeps_its_trailing_blanks_as_cron_does():
    job = only_job("0 1 * * * mysql -e 'CALL x()' % \n")
    assert (job["command"], job["stdin"]) == ("mysql -e 'CALL x()' ", " ")
    assert reasons("0 1 * * *   \n") == {
        1: "5 fields and no command: a job line has 5 schedule fields (minute hour "
        "day-of-month month day-of-week) and a command"
    }


def test_addresses_with_the_same_slug_get_channels_of_their_own():
    text = "MAILTO=a.b@example.com\n0 1 * * * x\nMAILTO=a-b@example.com\n0 2 * * * y\n"
    result = imported(text)
    channels = {c["name"]: c["to"] for c in result.document["channels"]}
    assert len(channels) == 2 and ["a.b@example.com"] in channels.values()
    rules = {r["owner"]: r["channels"] for r in result.document["notify"]}
    assert channels[rules["a-b@example.com"][0]] == ["a-b@example.com"]
    assert channels[rules["a.b@example.com"][0]] == ["a.b@example.com"]
