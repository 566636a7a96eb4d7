"""How `croniq` shows answers to a person (croniq_runner.cli_tables)."""

from croniq_runner.cli_tables import (
    EXECUTION_COLUMNS,
    JOB_COLUMNS,
    fields,
    job_status,
    plan,
    table,
    when,
)


def test_instants_are_shown_in_utc_to_the_second():
    assert when("2026-12-02T08:00:00.123456+01:00") == "2026-12-02 07:00:00Z"
    assert when(None) == ""
    assert when("soon") == "soon"


def test_columns_are_as_wide_as_their_widest_cell():
    jobs = [
        {"name": "a", "project": "default", "schedule": "@daily", "timezone": "UTC",
         "next_run_at": None, "paused": False, "enabled": True, "labels": ["linux", "gpu"],
         "managed_by": "apply"},
        {"name": "nightly-report", "project": "payroll", "schedule": "30 2 * * *",
         "timezone": "Europe/Berlin", "next_run_at": "2026-12-02T01:30:00Z", "paused": True,
         "paused_until": None, "labels": [], "managed_by": "api"},
    ]  # fmt: skip

    shown = [column for column in JOB_COLUMNS if column[0] != "TIMEZONE"]

    assert table(jobs, shown).splitlines() == [
        "NAME            PROJECT  SCHEDULE    NEXT RUN              STATUS   LABELS     MANAGED BY",
        "a               default  @daily                            enabled  linux,gpu  apply",
        "nightly-report  payroll  30 2 * * *  2026-12-02 01:30:00Z  paused              api",
    ]


def test_an_empty_cell_and_a_multi_line_value_keep_the_row_on_one_line():
    execution = {"id": 1, "job": "j", "state": "failed", "trigger": "manual", "attempt": 1,
                 "scheduled_for": None, "runner": None, "exit_code": None}  # fmt: skip

    [_, row] = table([{**execution, "job": "two\nlines"}], EXECUTION_COLUMNS).splitlines()

    assert row.split() == ["1", "two", "lines", "failed", "manual", "1"]


def test_a_job_paused_until_an_instant_says_so():
    assert job_status({"paused": True, "paused_until": "2026-12-24T00:00:00Z"}) == (
        "paused until 2026-12-24 00:00:00Z"
    )
    assert job_status({"paused": False, "enabled": False}) == "disabled"


def test_one_item_is_shown_field_by_field():
    assert fields({"name": "j", "labels": ["a", "b"], "singleton": True, "timeout": None}) == (
        "name:      j\nlabels:    a, b\nsingleton: yes\ntimeout:   -"
    )


def test_an_apply_without_changes_says_everything_is_as_the_file_says():
    assert plan({"changes": [], "applied": True}) == (
        "nothing to change: everything is as the file says"
    )
    assert plan(
        {"changes": [{"action": "create", "kind": "job", "name": "j"}], "applied": True}
    ).endswith("applied 1 change(s)")
