"""The dead letters in the admin: a list to filter, and the replay and
discard actions (scheduler.triage.dead_letter_actions), each behind its permission."""

from datetime import datetime

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from audit.audited_admin import AuditedModelAdmin
from core.admin_mixins import CheapPaginator
from projects.admin_scoping import ProjectScoped
from scheduler.models import Job
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter, with_status


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [(status, status) for status in DeadLetter.STATUSES]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in DeadLetter.STATUSES:
            return queryset.filter(with_status(self.value()))
        return queryset


@admin.register(DeadLetter)
class DeadLetterAdmin(ProjectScoped, AuditedModelAdmin):
    project_field = "execution__job__project"
    list_display = ["id", "job", "scheduled_for", "attempt", "reason", "landed_at", "status"]
    list_filter = [StatusFilter, "reason", "landed_at"]
    search_fields = ["execution__job__name", "detail"]
    list_select_related = ["execution__job"]
    show_full_result_count = False
    paginator = CheapPaginator
    actions = ["replay", "replay_forced", "discard"]
    fields = [
        "execution",
        "reason",
        "detail",
        "log",
        "landed_at",
        "replayed_at",
        "replayed_execution",
        "discarded_at",
    ]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # dead letters come from runs that gave up

    def has_change_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return False  # replayed or discarded through the actions, audited

    @admin.display(description="job", ordering="execution__job__name")
    def job(self, dead_letter: DeadLetter) -> Job:
        return dead_letter.execution.job

    @admin.display(description="scheduled for", ordering="execution__scheduled_for")
    def scheduled_for(self, dead_letter: DeadLetter) -> datetime:
        return dead_letter.execution.scheduled_for

    @admin.display(description="attempt")
    def attempt(self, dead_letter: DeadLetter) -> int:
        return dead_letter.execution.attempt

    @admin.display(description="last log lines")
    def log(self, dead_letter: DeadLetter) -> str:
        return format_html(
            "<pre style='white-space:pre-wrap'>{}</pre>", dead_letter.log_tail or "(no output)"
        )

    def has_replay_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return self.may_act(request, "deadletter.replay", obj)

    def has_discard_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return self.may_act(request, "deadletter.discard", obj)

    @admin.action(description="Replay selected dead letters", permissions=["replay"])
    def replay(self, request: HttpRequest, queryset: QuerySet, force: bool = False) -> None:
        replayed = 0
        now = timezone.now()
        for dead_letter in queryset.select_related("execution__job"):
            try:
                dead_letter_actions.replay(dead_letter, now, request.user, force=force)
                replayed += 1
            except OperationRefused as e:
                self.message_user(request, str(e), messages.WARNING)
        self.message_user(request, f"Replayed {replayed} dead letter(s).")

    @admin.action(
        description="Replay selected dead letters, stale ones too (force)", permissions=["replay"]
    )
    def replay_forced(self, request: HttpRequest, queryset: QuerySet) -> None:
        self.replay(request, queryset, force=True)

    @admin.action(description="Discard selected dead letters", permissions=["discard"])
    def discard(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = dead_letter_actions.discard(queryset, timezone.now(), request.user)
        self.message_user(request, f"Discarded {count} dead letter(s).")
