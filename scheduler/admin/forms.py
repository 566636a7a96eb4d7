"""The admin's job form: labels and parameters as tags, the environment as
rows of name and value, the timezone typed with suggestions.

Each field is checked with the apply file's check (`scheduler.apply.items`,
the timezone's validator), so the admin and `manage.py apply` refuse the
same things with the same words. Scripts that post the old JSON ('{}',
'["linux"]') are still understood.
"""

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from django import forms
from django.utils import timezone

from calendars.admin_forms import TimezoneField
from core.admin_widgets import CheckedField, MappingField, NamesField
from croniq_runner.sizes import SizeError, parse_size, written
from scheduler.apply.fields import JOB_SIZE_BOUNDS
from scheduler.apply.items import (
    ApplyError,
    container_spec,
    exit_codes,
    http_request,
    job_env,
    one_shot_instants,
    parameter_names,
    requirement_list,
    schedule_list,
    secret_problems,
    size,
    string_list,
    tag_list,
)
from scheduler.models import Job


def checked(field: str, check: Callable[[str, Any], Any]) -> Callable[[Any], Any]:
    """A form check from apply's `check(where, value)`: its value, or its
    ApplyError as the form's error without the field name in front."""

    def run(value):
        try:
            return check(field, value)
        except ApplyError as e:
            raise forms.ValidationError(
                [message.removeprefix(f"{field}: ") for message in e.errors]
            ) from None

    return run


class RequiresField(MappingField):
    """A job's `requires` as rows of job name and window; stored as
    [{job, succeeded_within}], which scripts may also post as JSON."""

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and value.strip().startswith("["):
            return super().to_python(value)  # JSON: apply's check reads the list
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        return super().to_python(value)

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return [(v.get("job", ""), v.get("succeeded_within", "")) for v in value]
        return super().prepare_value(value)


def requirement_rows(where: str, value: Any) -> list[dict[str, Any]]:
    """Apply's check of `requires`, from rows ({job: window}) or a list."""
    if isinstance(value, dict):
        value = [{"job": job, "succeeded_within": within} for job, within in value.items()]
    return requirement_list(where, value)


class SchedulesField(CheckedField):
    """`schedules` typed one a line, each read in the job's timezone; those on
    a clock of their own as JSON: [{"cron": "0 9 * * *", "timezone": "America/New_York"}]."""

    widget = forms.Textarea(attrs={"rows": 3, "class": "vLargeTextField"})

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, list):
            return value or []
        text = str(value).strip()
        if text.startswith("["):
            try:
                return json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                raise forms.ValidationError("not a JSON list of schedules") from None
        return [line.strip() for line in text.splitlines() if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            if all(isinstance(item, str) for item in value):
                return "\n".join(value)
            return json.dumps(value)
        return value


class RequestField(CheckedField):
    """An http job's request as JSON: {"url": ..., "method": ..., "headers":
    {...}, "body": ..., "expect_status": [...], "timeout": ...}; empty for a
    shell job."""

    widget = forms.Textarea(attrs={"rows": 6, "class": "vLargeTextField"})
    # What the JSON looks like, said when it is none.
    shape = '{"url": "https://...", ...}'

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, dict):
            return value or {}
        text = str(value).strip()
        if not text:
            return {}
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise forms.ValidationError(f"not JSON: {self.shape}") from None

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value, indent=2) if value else ""
        return value


class ContainerField(RequestField):
    """A container job's container as JSON: {"image": ..., "args": [...],
    "env": {...}, "pull": ..., "network": ...}; empty for the other kinds."""

    shape = '{"image": "alpine:3.20", "args": [...], ...}'


class SizeField(CheckedField):
    """A size typed as people write it (`64MiB`, `16KiB`, or bytes), shown
    the same way; stored in bytes, bounded as apply bounds it."""

    widget = forms.TextInput(attrs={"class": "vTextField", "placeholder": "64MiB"})

    def __init__(self, name: str, *, help_text: str = "") -> None:
        least, most = JOB_SIZE_BOUNDS[name]
        super().__init__(
            required=False,
            help_text=help_text,
            check=checked(name, lambda where, value: checked_size(where, value, least, most)),
        )

    def to_python(self, value: Any) -> Any:
        if value in (None, ""):
            return None
        try:
            return parse_size(value)
        except SizeError:
            return value  # the check says what is wrong with it

    def prepare_value(self, value: Any) -> Any:
        return written(value) if isinstance(value, int) and not isinstance(value, bool) else value


def checked_size(where: str, value: Any, least: int, most: int) -> int | None:
    return None if value is None else size(where, value, least, most)


class ExitCodesField(CheckedField):
    """Exit codes typed with commas between them (`0, 3`), stored as a list."""

    widget = forms.TextInput(attrs={"class": "vTextField", "placeholder": "0, 3"})

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, list):
            return value or []
        words = str(value).replace(",", " ").split()
        return [int(word) if word.isdigit() else word for word in words]

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(code) for code in value)
        return value


def apply_check(field: str, check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """apply's `check(field, *args)`: its value, or its ApplyError as the
    form's error without the field name in front."""
    try:
        return check(field, *args, **kwargs)
    except ApplyError as e:
        raise forms.ValidationError(
            [message.removeprefix(f"{field}: ") for message in e.errors]
        ) from None


class JobAdminForm(forms.ModelForm):
    env = MappingField(
        required=False,
        # Its secret references are checked in `clean`, against the job's project.
        check=checked("env", partial(job_env, project=None)),
        help_text="Extra environment variables, one name and value per row.",
    )
    labels = NamesField(
        required=False,
        check=checked("labels", string_list),
        help_text="A runner must carry all of these labels to run the job; "
        "separate them with commas, e.g. linux, gpu.",
    )
    tags = NamesField(
        required=False,
        check=checked("tags", tag_list),
        help_text="What you find and act on jobs by, never where they run; separate them "
        "with commas, e.g. billing, nightly (lower case, digits, '.', '_', '-').",
    )
    on_success = NamesField(
        required=False,
        check=checked("on_success", string_list),
        help_text="Jobs to run when a run of this one succeeds, e.g. report, notify-bi.",
    )
    on_failure = NamesField(
        required=False,
        check=checked("on_failure", string_list),
        help_text="Jobs to run when a run of this one fails for good (after its retries).",
    )
    requires = RequiresField(
        required=False,
        check=checked("requires", requirement_rows),
        help_text="One job per row, with how long before the instant its success may be "
        '(a duration: "2h", "1d", or seconds).',
    )
    parameters = NamesField(
        required=False,
        check=checked("parameters", parameter_names),
        help_text="Names of environment variables a manual trigger may set, "
        "e.g. REPORT_DATE, REGION.",
    )
    # As typed: a trailing newline is part of the input the command reads.
    stdin = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Text fed to the command's standard input, as typed. Empty: no input.",
    )
    # A post without it (a script written before kinds) is a shell job.
    kind = forms.ChoiceField(
        choices=Job.KINDS,
        required=False,
        initial=Job.SHELL,
        help_text="What a run does: run the command (shell), make the request (http) or run "
        "the container (container, on runners whose agent found docker or podman).",
    )
    http = RequestField(
        required=False,
        help_text='With kind http, the request as JSON: {"url": "https://...", "method": '
        '"POST", "headers": {"Authorization": "Bearer ${secret:NAME}"}, "body": "...", '
        '"expect_status": [200, 204], "timeout": 30}; only the url is required. '
        "Empty for the other kinds.",
    )
    container = ContainerField(
        required=False,
        help_text='With kind container, what the engine runs, as JSON: {"image": '
        '"registry.example.com/team/report:1.4", "args": ["python", "report.py"], "env": '
        '{"DB_PASSWORD": "${secret:NAME}"}, "pull": "missing", "network": "bridge"}; only '
        "the image is required (pull: missing, always or never; network: none, bridge or "
        "host). Empty for the other kinds.",
    )
    # A post without them (a script written before limits) keeps the defaults.
    max_output = SizeField(
        "max_output",
        help_text="Bytes of output a run's log keeps, e.g. 64MiB, 512KiB (1 KiB to 1 GiB); "
        "past it the log keeps its head and tail. Empty: the server's log limit.",
    )
    on_max_output = forms.ChoiceField(
        choices=Job.OUTPUT_POLICIES,
        required=False,
        initial=Job.TRUNCATE,
        help_text="Output past max output: truncate the log, or end the run and fail it.",
    )
    max_memory = SizeField(
        "max_memory",
        help_text="Memory the command's processes may use together, e.g. 512MiB, 2GiB; past "
        "it the run fails. Empty: no limit.",
    )
    success_exit_codes = ExitCodesField(
        required=False,
        check=checked("success_exit_codes", exit_codes),
        help_text="The exit codes that make a run succeed, separated by commas, e.g. 0, 3. "
        "Empty: 0 alone.",
    )
    timezone = TimezoneField(
        initial="UTC", help_text="The IANA timezone the schedule is read in, e.g. Europe/Berlin."
    )
    schedules = SchedulesField(
        required=False,
        help_text="More schedules, one a line, read in the job's timezone; for one on a "
        'clock of its own, JSON: [{"cron": "0 9 * * *", "timezone": "America/New_York"}]. '
        "The job fires at each instant any schedule gives, once.",
    )
    at = NamesField(
        required=False,
        help_text="One-shot instants with their offset, separated by commas, e.g. "
        "2026-06-01T09:00:00+02:00. A new one must be in the future.",
    )

    class Meta:
        help_texts = {
            "schedule": '5-field cron ("30 2 * * *"), a macro (@daily), "@every 5m" or '
            '"@business_day 3 09:00" (the 3rd day of the month the calendar allows; '
            "-1 is the last).",
        }
        model = Job
        fields = [
            "name", "description", "kind", "command", "http", "container", "stdin", "run_as",
            "env", "parameters", "labels", "tags",
            "schedule", "schedules", "at", "run_on_register", "webhook", "webhook_secret",
            "timezone", "not_before", "not_after", "max_runs",
            "calendar", "calendar_policy", "jitter", "misfire_policy", "overlap",
            "max_concurrent", "max_queue", "concurrency_group", "run_on", "stagger",
            "timeout", "retries", "retry_backoff", "enabled", "owner", "max_duration",
            "min_duration", "maintenance", "pause_after_failures", "on_success", "on_failure",
            "requires", "requires_policy", "requires_timeout",
            "max_output", "on_max_output", "max_memory", "max_cpu_seconds", "success_exit_codes",
        ]  # fmt: skip

    def clean_kind(self) -> str:
        return self.cleaned_data["kind"] or Job.SHELL

    def clean_on_max_output(self) -> str:
        return self.cleaned_data["on_max_output"] or Job.TRUNCATE

    def clean_schedules(self) -> list[Any]:
        name = self.cleaned_data.get("name") or self.instance.name
        return apply_check("schedules", schedule_list, self.cleaned_data["schedules"], key=name)

    def clean_at(self) -> list[str]:
        # A new one-shot instant must be to come; those the job has stay.
        kept = self.instance.at if self.instance.pk else []
        return apply_check("at", one_shot_instants, self.cleaned_data["at"], timezone.now(), kept)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # A job reads its own project's secrets alone (docs/design.md §11).
        project = cleaned.get("project") or self.instance.project
        if cleaned.get("env"):
            try:
                secret_problems("env", cleaned["env"], project)
            except ApplyError as e:
                self.add_error("env", [m.removeprefix("env.") for m in e.errors])
        if "http" in cleaned:
            # Checked here, not on its own: its timeout is bounded by the job's.
            try:
                cleaned["http"] = http_request(
                    "http", cleaned["http"], cleaned.get("timeout"), project
                )
            except ApplyError as e:
                # On the field: "url: ...", not "http.url: ...".
                errors = [m.removeprefix("http: ").removeprefix("http.") for m in e.errors]
                self.add_error("http", errors)
        if "container" in cleaned:
            try:
                cleaned["container"] = container_spec("container", cleaned["container"], project)
            except ApplyError as e:
                errors = [
                    m.removeprefix("container: ").removeprefix("container.") for m in e.errors
                ]
                self.add_error("container", errors)
        for field in ("http", "container"):
            if field in self.errors:
                # Said on the field: the job's own check would add that it has none.
                setattr(self.instance, f"{field}_refused", True)
        # The form edits the overlap policy; `singleton`, its older name, follows.
        self.instance.singleton = cleaned.get("overlap") == Job.SKIP
        return cleaned
