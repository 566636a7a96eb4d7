"""Checks and their pings in the admin, read-only (docs/design.md §12):
checks are written through the management API. The ping URL carries the
check's secret: it is shown only to whoever may change checks (the Croniq
admins), as a viewer who read it could fake the check's pings."""

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from checks import items
from checks.models import Check, Ping
from core.admin_mixins import CheapPaginator, ReadOnlyModelAdmin
from projects import scoping
from projects.admin_scoping import ProjectScoped


class ReadOnlyScoped(ProjectScoped, ReadOnlyModelAdmin):
    """Seen by the role in the row's project; written through the API alone."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Check)
class CheckAdmin(ReadOnlyScoped):
    list_display = [
        "name",
        "project",
        "state",
        "timing",
        "last_ping_at",
        "next_expected_at",
        "pings_link",
    ]
    list_filter = ["state"]
    search_fields = ["name"]
    fields = [
        "name",
        "project",
        "description",
        "labels",
        "schedule",
        "timezone",
        "period",
        "grace",
        "state",
        "last_ping_at",
        "last_start_at",
        "next_expected_at",
        "down_at",
        "n_pings",
        "ping_url",
        "managed_by",
        "managed_source",
        "created_at",
        "updated_at",
    ]
    readonly_fields = fields

    @admin.display(description="expects")
    def timing(self, check: Check) -> str:
        if check.schedule:
            return f"{check.schedule} ({check.timezone}), grace {check.grace}s"
        return f"every {check.period}s, grace {check.grace}s"

    @admin.display(description="pings")
    def pings_link(self, check: Check) -> str:
        url = reverse("admin:checks_ping_changelist") + f"?check={check.name}"
        return format_html('<a href="{}">{}</a>', url, check.n_pings)

    @admin.display(description="ping URL")
    def ping_url(self, check: Check) -> str:
        return items.ping_url(check)

    def get_fields(self, request: HttpRequest, obj: Check | None = None) -> list[str]:
        if scoping.may(request.user, "checks.change_check", obj):
            return list(self.fields)
        return [field for field in self.fields if field != "ping_url"]


class CheckNameFilter(admin.SimpleListFilter):
    """`?check=<name>`, the check page's link: not in the sidebar (a list of
    every check would be as long as the checks)."""

    title = "check"
    parameter_name = "check"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return []

    def has_output(self) -> bool:
        return False

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(subject__name=self.value())
        return queryset


@admin.register(Ping)
class PingAdmin(ReadOnlyScoped):
    # A check's pings are seen by the role in its project.
    project_field = "subject__project"
    list_display = ["received_at", "subject", "kind", "exit_status", "duration", "remote_addr"]
    list_filter = [CheckNameFilter, "kind"]
    list_select_related = ["subject"]
    fields = [
        "subject",
        "n",
        "kind",
        "exit_status",
        "received_at",
        "duration",
        "remote_addr",
        "user_agent",
        "body_truncated",
        "body",
    ]
    readonly_fields = fields
    paginator = CheapPaginator
    show_full_result_count = False

    def holder(self, obj: Ping) -> Check:
        return obj.subject
