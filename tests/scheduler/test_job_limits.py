"""A job's limits (docs/design.md §15) as the model, apply, export and the
admin take them: sizes written `64MiB`, `16KiB`, `1GiB` or in bytes, stored
in bytes; errors naming the field (`jobs[0].max_memory: ...`); the limits a
process has refused on an http job; and which need an agent that announced
`limits`."""

import datetime as dt
from io import StringIO

import pytest
import yaml
from django.core.exceptions import ValidationError
from django.core.management import call_command

from runners.models import Runner
from scheduler.admin.forms import JobAdminForm
from scheduler.apply.document import ApplyError, apply
from scheduler.apply.export import export
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.scheduler.test_admin_forms import posted

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
MIB = 1024 * 1024


def item(**fields):
    return {"name": "report", "schedule": "@daily", "command": "python report.py", **fields}


def applied(**fields):
    apply({"jobs": [item(**fields)]}, now=NOW)
    return Job.objects.get(name="report")


def apply_errors(**fields):
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item(**fields)]}, now=NOW, dry_run=True)
    return refused.value.errors


# -- apply --------------------------------------------------------------------------


def test_apply_reads_sizes_as_people_write_them_and_stores_bytes():
    job = applied(
        max_output="16KiB",
        max_memory="64MiB",
        max_cpu_seconds="2m",
        on_max_output="fail",
        success_exit_codes=[3, 0, 3],
    )
    assert (job.max_output, job.max_memory, job.max_cpu_seconds) == (16 * 1024, 64 * MIB, 120)
    assert job.on_max_output == "fail"
    assert job.success_exit_codes == [0, 3]  # sorted, each once
    job = applied(max_output=4096, max_memory="1GiB", max_cpu_seconds=30)
    assert (job.max_output, job.max_memory, job.max_cpu_seconds) == (4096, 1024 * MIB, 30)
    # Left out again, each is none: apply writes the whole job.
    job = applied()
    assert (job.max_output, job.max_memory, job.max_cpu_seconds) == (None, None, None)
    assert (job.on_max_output, job.success_exit_codes) == ("truncate", [])


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"max_memory": "64MB"}, "jobs[0].max_memory: '64MB' is not a size: units are binary, "
         "write 64MiB (64 x 1048576 bytes)"),
        ({"max_memory": "lots"}, "jobs[0].max_memory: 'lots' is not a size: a whole number of "
         "bytes, or one followed by KiB, MiB or GiB (64MiB)"),
        ({"max_memory": "512KiB"}, "jobs[0].max_memory: from 1 MiB to 1 TiB, got 512 KiB "
         "('512KiB')"),
        ({"max_output": 100}, "jobs[0].max_output: from 1 KiB to 1 GiB, got 100 bytes (100)"),
        ({"max_output": "2GiB"}, "jobs[0].max_output: from 1 KiB to 1 GiB, got 2 GiB ('2GiB')"),
        ({"max_output": True}, "jobs[0].max_output: True is not a size: a whole number of "
         "bytes, or one followed by KiB, MiB or GiB (64MiB)"),
        ({"max_cpu_seconds": 0}, "jobs[0].max_cpu_seconds: must be at least 1 second(s), got 0"),
        ({"max_cpu_seconds": "soon"}, "jobs[0].max_cpu_seconds: 'soon' is not a duration: "
         'seconds (900) or a text like "30s", "15m", "1h30m", "2d"'),
        ({"success_exit_codes": [0, 256]}, "jobs[0].success_exit_codes[1]: 256 is not an exit "
         "code (0-255)"),
        ({"success_exit_codes": ["3"]}, "jobs[0].success_exit_codes[0]: '3' is not an exit code "
         "(0-255)"),
        ({"success_exit_codes": 3}, "jobs[0].success_exit_codes: expected a list of exit codes "
         "like [0, 3]"),
    ],
)  # fmt: skip
def test_apply_refuses_a_bad_limit_naming_the_field(fields, error):
    assert apply_errors(**fields) == [error]


def test_apply_refuses_an_output_policy_it_does_not_know():
    [error] = apply_errors(on_max_output="drop")
    assert error.startswith("jobs[0].on_max_output: ")
    assert "drop" in error


def test_an_http_job_takes_an_output_limit_but_no_limit_of_a_process():
    http = {"kind": "http", "command": "", "http": {"url": "https://example.com/"}}
    job = applied(**http, max_output="64KiB", on_max_output="fail")
    assert (job.max_output, job.on_max_output) == (64 * 1024, "fail")
    assert apply_errors(**http, max_memory="64MiB", max_cpu_seconds=5, success_exit_codes=[0]) == [
        "jobs[0].max_memory: only with kind: shell (an http job starts no process)",
        "jobs[0].max_cpu_seconds: only with kind: shell (an http job starts no process)",
        "jobs[0].success_exit_codes: only with kind: shell (an http job succeeds on "
        "http.expect_status)",
    ]


CONTAINER = {"kind": "container", "command": "", "container": {"image": "alpine:3.20"}}


def test_a_container_job_takes_an_output_limit_and_exit_codes_but_no_limit_of_a_process():
    job = applied(**CONTAINER, max_output="64KiB", on_max_output="fail", success_exit_codes=[0, 3])
    assert (job.max_output, job.on_max_output) == (64 * 1024, "fail")
    assert job.success_exit_codes == [0, 3]
    assert job.features == {"container", "limits"}
    assert apply_errors(**CONTAINER, max_memory="64MiB", max_cpu_seconds=5) == [
        "jobs[0].max_memory: only with kind: shell (a container job's memory is its engine's "
        "to limit)",
        "jobs[0].max_cpu_seconds: only with kind: shell (a container job's CPU is its engine's "
        "to limit)",
    ]


# -- the model ----------------------------------------------------------------------


def test_the_model_refuses_limits_out_of_bounds():
    job = Job(name="report", schedule="@daily", command="true", max_output=10, max_memory=1)
    job.success_exit_codes = [0, 0]
    with pytest.raises(ValidationError) as refused:
        job.full_clean()
    assert set(refused.value.message_dict) == {"max_output", "max_memory", "success_exit_codes"}


@pytest.mark.parametrize(
    ("fields", "needs"),
    [
        ({}, False),
        ({"max_output": 4096}, False),  # the server cuts an older agent's log
        ({"success_exit_codes": [0, 3]}, False),  # the server reads the exit code
        ({"max_output": 4096, "on_max_output": "fail"}, True),
        ({"max_memory": 64 * MIB}, True),
        ({"max_cpu_seconds": 2}, True),
    ],
)
def test_limits_an_older_agent_would_ignore_need_an_agent_announcing_limits(fields, needs):
    job = Job(name="report", command="true", labels=["linux"], **fields)
    assert ("limits" in job.features) is needs
    assert ("\x00feature:limits" in job.requirements) is needs


def test_a_run_succeeds_on_the_listed_exit_codes_or_zero_alone():
    assert Job(success_exit_codes=[]).succeeds_with(0)
    assert not Job(success_exit_codes=[]).succeeds_with(3)
    listed = Job(success_exit_codes=[0, 3])
    assert listed.succeeds_with(3) and listed.succeeds_with(0) and not listed.succeeds_with(1)
    assert not Job(success_exit_codes=[3]).succeeds_with(0)  # the list is the whole list
    assert not listed.succeeds_with(None)  # killed by a signal, or never started


def test_a_log_keeps_the_server_limit_unless_the_job_sets_its_own(settings):
    settings.CRONIQ_LOG_LIMIT = 3 * MIB
    assert Job().output_limit == 3 * MIB
    assert Job(max_output=64 * 1024).output_limit == 64 * 1024


# -- what runners must announce ------------------------------------------------------


def test_apply_warns_when_only_agents_without_limits_carry_the_jobs_labels(tmp_path):
    Runner.objects.create(
        name="web-1", labels=["linux"], session="s", registered_at=NOW, last_seen_at=NOW,
        version="0.3.0", features=["stdin", "run_as", "http"],
    )  # fmt: skip
    path = tmp_path / "croniq.yaml"
    path.write_text(yaml.safe_dump({"jobs": [item(labels=["linux"], max_memory="64MiB")]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue().splitlines() == [
        "warning: job report: the job needs limits, which the agents of the runners with "
        "labels linux do not support: web-1 (0.3.0); upgrade croniq-runner; its runs wait "
        "until one registers"
    ]
    # Its output limit alone needs nothing of them.
    path.write_text(yaml.safe_dump({"jobs": [item(labels=["linux"], max_output="64KiB")]}))
    err = StringIO()
    call_command("apply", str(path), stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""


# -- export ---------------------------------------------------------------------------


def test_the_export_writes_sizes_as_people_write_them_and_applies_back_unchanged():
    applied(max_output=1536 * 1024, max_memory=MIB + 1, max_cpu_seconds=90, success_exit_codes=[3])
    [written] = export().document["jobs"]
    assert written["max_output"] == "1536KiB"
    assert written["max_memory"] == MIB + 1  # no unit divides it: in bytes
    assert (written["max_cpu_seconds"], written["success_exit_codes"]) == (90, [3])
    assert "on_max_output" not in written  # at its default
    changes = apply(export().document, now=NOW, dry_run=True)
    assert [change.action for change in changes] == ["unchanged"]


# -- the admin ------------------------------------------------------------------------


def test_the_admin_form_takes_sizes_and_exit_codes_as_typed_and_shows_them_so():
    data = job_form(
        max_output="512KiB", max_memory="2GiB", max_cpu_seconds="30", success_exit_codes="0, 3",
        on_max_output="fail",
    )  # fmt: skip
    form = JobAdminForm(data=posted(data))
    assert form.is_valid(), form.errors
    job = form.save()
    assert (job.max_output, job.max_memory, job.max_cpu_seconds) == (512 * 1024, 2048 * MIB, 30)
    assert (job.on_max_output, job.success_exit_codes) == ("fail", [0, 3])
    shown = JobAdminForm(instance=job)
    assert 'value="512KiB"' in str(shown["max_output"])
    assert 'value="2GiB"' in str(shown["max_memory"])
    assert 'value="0, 3"' in str(shown["success_exit_codes"])


def test_the_admin_form_refuses_a_bad_limit_on_its_field_as_apply_does():
    form = JobAdminForm(
        data=posted(job_form(max_memory="64MB", max_output="10", success_exit_codes="0, 300"))
    )
    assert not form.is_valid()
    assert form.errors["max_memory"] == [
        "'64MB' is not a size: units are binary, write 64MiB (64 x 1048576 bytes)"
    ]
    assert form.errors["max_output"] == ["from 1 KiB to 1 GiB, got 10 bytes (10)"]
    assert form.errors["success_exit_codes"] == [
        "success_exit_codes[1]: 300 is not an exit code (0-255)"
    ]


def test_an_admin_post_without_limits_keeps_none():
    # A script written before limits posts none of their fields.
    form = JobAdminForm(data=posted(job_form()))
    assert form.is_valid(), form.errors
    job = form.save()
    assert (job.max_output, job.max_memory, job.max_cpu_seconds) == (None, None, None)
    assert (job.on_max_output, job.success_exit_codes) == ("truncate", [])
