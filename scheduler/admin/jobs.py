import json
from datetime import UTC, datetime
from typing import Any

from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from audit.audited_admin import AuditedModelAdmin
from audit.changes import diff, masked_container, masked_env, masked_http, snapshot
from core.admin_mixins import CheapPaginator
from core.ownership import AdoptedOnSave
from projects.admin_scoping import ProjectScoped
from scheduler.admin.forms import JobAdminForm
from scheduler.admin.preview import FirePreviewAdmin
from scheduler.jobs import tags
from scheduler.jobs.cron import uses_key
from scheduler.jobs.label_checks import WarnsOfUnservedLabels
from scheduler.models import ConcurrencyGroup, Execution, Job, LogChunk
from scheduler.runs import groups, operations

# Fields the form does not write; read back after a save so the object (and
# its audit diff) show what is stored.
UNSAVED_STATE = [*Job.SCHEDULER_FIELDS, "paused_at", "paused_until", "pause_reason"]
# What who may only view a job sees instead of a field: secret-looking values masked.
MASKED = {"env": "env_masked", "http": "http_masked", "container": "container_masked"}
NEXT_FIRES_SHOWN = 10
LOG_SHOWN = 200_000  # characters of log shown inline in the admin


def schedule_in_words(schedule: str, name: str) -> str:
    from scheduler.jobs.cron import ScheduleError, describe

    if not schedule:
        return "no schedule: runs when a runner starts (run on register)"
    try:
        return describe(schedule, key=name)
    except ScheduleError as e:
        return str(e)


def more(schedules: list, at: list) -> str:
    """What a job fires at besides a schedule, in a few words ("" for none)."""
    parts = []
    if schedules:
        parts.append(f"{len(schedules)} more schedule{'s' if len(schedules) > 1 else ''}")
    if at:
        parts.append(f"{len(at)} one-shot instant{'s' if len(at) > 1 else ''}")
    return f"(+ {', '.join(parts)})" if parts else ""


def timing_in_words(job: Job) -> str:
    """A job without `schedule` but with `schedules` or `at`, in words."""
    first = job.schedules[0] if job.schedules else None
    if first is None:
        return f"at {len(job.at)} one-shot instant{'s' if len(job.at) > 1 else ''}"
    text = first.get("cron") if isinstance(first, dict) else first
    words = schedule_in_words(text, job.name)
    return " ".join(filter(None, [words, more(job.schedules[1:], job.at)]))


def fire_time(job: Job, instant: datetime) -> str:
    """A fire time on the job's own clock, where its schedule is read, with UTC beside it."""
    wall, utc = job.wall_and_utc(instant)
    html = format_html('<time datetime="{}">{}</time>', instant.astimezone(UTC).isoformat(), wall)
    if utc is None:
        return html
    return format_html('{} <span class="quiet">({})</span>', html, utc)


class TagFilter(admin.SimpleListFilter):
    """`?tag=<tag>`: the jobs carrying one tag (scheduler.jobs.tags), the
    dashboard's filter of the same name."""

    title = "tag"
    parameter_name = "tag"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        # The tags of the jobs the user may see: another project's are its own.
        return [(tag, tag) for tag in tags.in_use(model_admin.get_queryset(request))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return tags.carrying(queryset, self.value())
        return queryset


@admin.register(Job)
class JobAdmin(
    ProjectScoped, FirePreviewAdmin, WarnsOfUnservedLabels, AdoptedOnSave, AuditedModelAdmin
):
    form = JobAdminForm
    list_display = [
        "name",
        "project",
        "schedule",
        "schedule_words",
        "calendar",
        "next_run",
        "last_result",
        "enabled",
        "is_paused",
        "has_error",
        "tags_shown",
    ]
    # Groups and calendars of the jobs listed: another project's are not named.
    list_filter = [
        TagFilter,
        "project",
        "enabled",
        "overlap",
        ("concurrency_group", admin.RelatedOnlyFieldListFilter),
        ("calendar", admin.RelatedOnlyFieldListFilter),
        "misfire_policy",
    ]
    search_fields = ["name", "command", "description"]
    list_select_related = ["calendar"]
    readonly_fields = [
        "next_run",
        "last_scheduled_at",
        "run_count",
        "paused_at",
        "paused_until",
        "pause_reason",
        "managed_by",
        "managed_source",
        "error",
        "error_at",
        "next_fires",
        "created_at",
        "webhook_link",
    ]
    actions = ["run_now", "pause", "resume", "regenerate_webhooks"]
    # Signed into the URL that runs the job: never written to the audit trail.
    audit_exclude = ("webhook_key",)
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "name",
                    "description",
                    "kind",
                    "command",
                    "http",
                    "container",
                    "stdin",
                    "run_as",
                    "env",
                    "parameters",
                    "labels",
                    "tags",
                ]
            },
        ),
        (
            "Schedule",
            {
                "fields": [
                    "schedule",
                    "schedules",
                    "at",
                    "run_on_register",
                    "timezone",
                    "not_before",
                    "not_after",
                    "max_runs",
                    "calendar",
                    "calendar_policy",
                    "jitter",
                    "misfire_policy",
                    "next_fires",
                ]
            },
        ),
        (
            "Webhook",
            {
                "fields": ["webhook", "webhook_secret", "webhook_link"],
                "description": "A URL that runs the job when POSTed to, with no API key: "
                'the URL is the secret. The body may set the job\'s parameters: {"env": '
                '{"NAME": "value"}}. The action "Give selected jobs a new webhook URL" '
                "revokes the current one.",
            },
        ),
        (
            "Runs",
            {
                "fields": [
                    "overlap",
                    "max_concurrent",
                    "max_queue",
                    "concurrency_group",
                    "run_on",
                    "stagger",
                    "timeout",
                    "retries",
                    "retry_backoff",
                    "enabled",
                    "maintenance",
                    "pause_after_failures",
                ]
            },
        ),  # fmt: skip
        (
            "Limits",
            {
                "fields": [
                    "max_output",
                    "on_max_output",
                    "max_memory",
                    "max_cpu_seconds",
                    "success_exit_codes",
                ],
                "description": "What a run may take: past its output the log keeps its head "
                "and tail (or the run fails); past its memory or CPU the run fails. Memory, CPU "
                "and on max output fail need runners whose agent announces limits.",
            },
        ),
        (
            "Chains",
            {
                "fields": ["on_success", "on_failure"],
                "description": "Jobs this one starts when a run ends, with its logical "
                "time; no cycles.",
            },
        ),
        (
            "Requires",
            {
                "fields": ["requires", "requires_policy", "requires_timeout"],
                "description": "An occurrence of the schedule runs only when each job "
                "listed has a run that succeeded within its window before the instant; "
                "otherwise the policy decides. No cycles with chains.",
            },
        ),
        (
            "Notifications",
            {
                "fields": ["owner", "max_duration", "min_duration"],
                "description": "Rules route on the owner; the durations say when a run "
                "is slow (job.slow) or suspiciously short (job.fast).",
            },
        ),
        (
            "State",
            {
                "fields": [
                    "next_run",
                    "last_scheduled_at",
                    "run_count",
                    "paused_at",
                    "paused_until",
                    "pause_reason",
                    "managed_by",
                    "managed_source",
                    "error",
                    "error_at",
                    "created_at",
                ],
                "description": "A job with an error is out of the schedule: "
                "saving it (or the Resume action) clears the error.",
            },
        ),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        last_state = (
            Execution.objects.filter(job=OuterRef("pk"))
            .exclude(state__in=Execution.ACTIVE_STATES)
            .order_by("-scheduled_for", "-attempt")
            .values("state")[:1]
        )
        # One subquery per page instead of one query per row.
        return super().get_queryset(request).annotate(last_state=Subquery(last_state))

    def get_fieldsets(
        self, request: HttpRequest, obj: Job | None = None
    ) -> list[tuple[str | None, dict[str, Any]]]:
        # Who may only look at a job sees its environment with secret-looking
        # values masked; who may change it edits the real values.
        # Nor do they see the webhook URL, which runs the job.
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        return [
            (
                title,
                {
                    **options,
                    "fields": [MASKED.get(f, f) for f in options["fields"] if f != "webhook_link"],
                },
            )
            for title, options in fieldsets
        ]

    @admin.display(description="webhook URL")
    def webhook_link(self, job: Job) -> str:
        url = job.webhook_url
        if url is None:
            return "— (turn webhook on and save)"
        return format_html("<code>{}</code>", url)

    @admin.display(description="env")
    def env_masked(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(masked_env(job.env), indent=2))

    @admin.display(description="http")
    def http_masked(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(masked_http(job.http), indent=2))

    @admin.display(description="container")
    def container_masked(self, job: Job) -> str:
        return format_html("<pre>{}</pre>", json.dumps(masked_container(job.container), indent=2))

    @admin.display(description="in words")
    def schedule_words(self, job: Job) -> str:
        if not job.schedule and (job.schedules or job.at):
            return timing_in_words(job)
        words = schedule_in_words(job.schedule, job.name)
        return " ".join(filter(None, [words, more(job.schedules, job.at)]))

    @admin.display(description="scheduled runs (max_runs)")
    def run_count(self, job: Job) -> str:
        if job.max_runs is None:
            return "—"
        done = " — completed: the job disabled itself" if job.completed else ""
        return f"{job.scheduled_runs} of {job.max_runs}{done}"

    @admin.display(description="tags")
    def tags_shown(self, job: Job) -> str:
        return ", ".join(job.tags or []) or "—"

    @admin.display(description="paused", boolean=True)
    def is_paused(self, job: Job) -> bool:
        return job.paused_at is not None

    @admin.display(description="error", boolean=True)
    def has_error(self, job: Job) -> bool:
        return bool(job.error)

    @admin.display(description="last result")
    def last_result(self, job: Job) -> str:
        return job.last_state or "—"

    @admin.display(description="next run at", ordering="next_run_at")
    def next_run(self, job: Job) -> str:
        if job.next_run_at is None:
            return "—"
        return fire_time(job, job.next_run_at)

    @admin.display(description="next fire times (calendar applied)")
    def next_fires(self, job: Job) -> str:
        if not job.pk:
            return "—"
        now = timezone.now()
        try:
            fires = job.upcoming(now, NEXT_FIRES_SHOWN)
            if not fires:
                return job.no_fires_reason(now)
        except ValueError as e:  # a schedule or timezone typed into this form that is invalid
            return str(e)
        return format_html(
            "<ol>{}</ol>",
            format_html_join("", "<li>{}</li>", ((fire_time(job, at),) for at in fires)),
        )

    def save_model(self, request: HttpRequest, obj: Job, form: ModelForm, change: bool) -> None:
        if not change:
            obj.reschedule(timezone.now())
            super().save_model(request, obj, form, change)
            return
        # Only what the operator changed is written: the rest of `obj` was
        # read when the form was, and the loop may have moved its fields on.
        fields = [
            *form.changed_data,
            "updated_at",
            *obj.clear_error(),
            *self.adopt(request, obj, change),
        ]
        if "overlap" in fields:
            fields.append("singleton")  # its older name follows it
        if "max_runs" in fields:
            fields += ["scheduled_runs", "enabled"]  # Job.sync_run_limit moves them
        # A new name moves a schedule's H forms and its jitter: they hash the name.
        renamed = "name" in fields and (uses_key(obj.schedule) or bool(obj.jitter))
        if set(fields) & {*Job.SCHEDULE_FIELDS, "error"} or renamed:
            obj.reschedule(timezone.now())
            fields.append("next_run_at")
        before = self.stored_snapshot(obj)
        obj.save(update_fields=fields)
        obj.refresh_from_db(fields=[f for f in UNSAVED_STATE if f not in fields])
        # The diff covers what this save wrote, not what the loop moved meanwhile.
        after = snapshot(obj, self.audit_exclude)
        changes = diff(
            {k: v for k, v in before.items() if k in fields},
            {k: v for k, v in after.items() if k in fields},
        )
        if changes:
            self.audit(request, obj, "changed", changes)

    def has_run_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self.may_act(request, "job.run", obj)

    def has_pause_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self.may_act(request, "job.pause", obj)

    def has_resume_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return self.may_act(request, "job.resume", obj)

    @admin.action(description="Run selected jobs now", permissions=["run"])
    def run_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        started = 0
        for job in queryset:
            try:
                operations.run_now(job, timezone.now(), request.user)
                started += 1
            except operations.OperationRefused as e:
                self.message_user(request, str(e), messages.WARNING)
        self.message_user(request, f"Started {started} job(s).")

    @admin.action(description="Give selected jobs a new webhook URL", permissions=["change"])
    def regenerate_webhooks(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = operations.regenerate_webhooks(queryset, timezone.now(), request.user)
        self.message_user(
            request, f"Gave {count} job(s) a new webhook URL; the old ones no longer run them."
        )

    @admin.action(description="Pause selected jobs", permissions=["pause"])
    def pause(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = operations.pause(queryset, timezone.now(), request.user)
        self.message_user(request, f"Paused {count} job(s).")

    @admin.action(description="Resume selected jobs", permissions=["resume"])
    def resume(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = operations.resume(queryset, timezone.now(), request.user)
        self.message_user(request, f"Resumed {count} job(s).")


@admin.register(Execution)
class ExecutionAdmin(ProjectScoped, AuditedModelAdmin):
    project_field = "job__project"
    list_display = [
        "id",
        "job",
        "scheduled_for",
        "attempt",
        "trigger",
        "state",
        "runner",
        "duration_text",
        "exit_code",
    ]
    list_filter = ["state", "trigger"]
    search_fields = ["job__name"]
    list_select_related = ["job", "runner"]
    raw_id_fields = ["job", "runner", "upstream"]
    show_full_result_count = False
    paginator = CheapPaginator
    actions = ["cancel", "retry"]
    readonly_fields = [
        "job",
        "scheduled_for",
        "attempt",
        "trigger",
        "state",
        "singleton",
        "run_after",
        "runner",
        "session",
        "lease",
        "lease_expires_at",
        "created_at",
        "claimed_at",
        "finished_at",
        "exit_code",
        "error",
        "lost_reason",
        "cancel_requested_at",
        "upstream",
        "log_size",
        "log_truncated",
        "log",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # executions come from schedules, "run now" and retries

    @admin.display(description="duration")
    def duration_text(self, execution: Execution) -> str:
        duration = execution.duration
        return f"{duration.total_seconds():.1f}s" if duration else "—"

    @admin.display(description="log")
    def log(self, execution: Execution) -> str:
        text = "".join(
            LogChunk.objects.filter(execution=execution)
            .order_by("seq")
            .values_list("data", flat=True)
        )
        if len(text) > LOG_SHOWN:
            text = text[-LOG_SHOWN:]
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", text or "(no output)")

    def has_cancel_permission(self, request: HttpRequest, obj: Execution | None = None) -> bool:
        return self.may_act(request, "execution.cancel", obj)

    def has_retry_permission(self, request: HttpRequest, obj: Execution | None = None) -> bool:
        return self.may_act(request, "execution.retry", obj)

    @admin.action(description="Cancel selected executions", permissions=["cancel"])
    def cancel(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = operations.cancel(queryset, timezone.now(), request.user)
        self.message_user(request, f"Cancelled or asked to stop {count} execution(s).")

    @admin.action(description="Retry selected executions now", permissions=["retry"])
    def retry(self, request: HttpRequest, queryset: QuerySet) -> None:
        retried = 0
        for execution in queryset.select_related("job"):
            try:
                operations.retry(execution, timezone.now(), request.user)
                retried += 1
            except operations.OperationRefused as e:
                self.message_user(request, str(e), messages.WARNING)
        self.message_user(request, f"Retried {retried} execution(s).")


@admin.register(ConcurrencyGroup)
class ConcurrencyGroupAdmin(ProjectScoped, AdoptedOnSave, AuditedModelAdmin):
    """Budgets shared by jobs; the running count is read live."""

    list_display = ["name", "project", "max_concurrent", "running", "job_count", "managed_by"]
    search_fields = ["name"]
    readonly_fields = ["managed_by", "managed_source", "created_at", "updated_at"]

    @admin.display(description="running now")
    def running(self, group: ConcurrencyGroup) -> int:
        return groups.running_counts([group.pk]).get(group.pk, 0)

    @admin.display(description="jobs")
    def job_count(self, group: ConcurrencyGroup) -> int:
        return group.jobs.count()

    def save_model(
        self, request: HttpRequest, obj: ConcurrencyGroup, form: ModelForm, change: bool
    ) -> None:
        self.adopt(request, obj, change)
        super().save_model(request, obj, form, change)
