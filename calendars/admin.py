from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from audit.audited_admin import AuditedModelAdmin
from calendars.admin_forms import CalendarAdminForm
from calendars.changes import calendar_changed
from calendars.models import Calendar, CalendarPeriod
from calendars.rules import RulesError, month_grid
from calendars.zones import wall
from core.instants import shown
from core.ownership import AdoptedOnSave
from projects import scoping
from projects.admin_scoping import ProjectScoped

PREVIEW_STRETCHES = 10
GRID_MONTHS = 3


class CalendarPeriodInline(admin.TabularInline):
    """A calendar's periods are part of it: whoever may change the calendar
    (add one, on the add page) edits them, by the role in its project."""

    model = CalendarPeriod
    extra = 0
    fields = ["kind", "label", "start_date", "end_date", "start_at", "end_at"]

    def may_edit(self, request: HttpRequest, calendar: Calendar | None) -> bool:
        if calendar is None:
            return scoping.may(request.user, "calendars.add_calendar")
        return scoping.may(request.user, "calendars.change_calendar", calendar)

    def has_add_permission(self, request: HttpRequest, obj: Calendar | None = None) -> bool:
        return self.may_edit(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Calendar | None = None) -> bool:
        return self.may_edit(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Calendar | None = None) -> bool:
        return self.may_edit(request, obj)

    def has_view_permission(self, request: HttpRequest, obj: Calendar | None = None) -> bool:
        return scoping.may(request.user, "calendars.view_calendar", obj)


@admin.register(Calendar)
class CalendarAdmin(ProjectScoped, AdoptedOnSave, AuditedModelAdmin):
    form = CalendarAdminForm
    list_display = [
        "name",
        "project",
        "timezone",
        "weekdays_shown",
        "holidays_shown",
        "window_shown",
        "base",
    ]
    list_select_related = ["base"]
    search_fields = ["name", "description"]
    show_full_result_count = False
    inlines = [CalendarPeriodInline]
    readonly_fields = ["next_allowed_preview", "managed_by", "managed_source"]
    change_form_template = "admin/calendars/calendar/change_form.html"

    @admin.display(description="weekdays")
    def weekdays_shown(self, calendar: Calendar) -> str:
        return ", ".join(calendar.weekdays) or "none"

    @admin.display(description="holidays")
    def holidays_shown(self, calendar: Calendar) -> str:
        return "-".join(filter(None, [calendar.holiday_country, calendar.holiday_subdivision]))

    @admin.display(description="daily window")
    def window_shown(self, calendar: Calendar) -> str:
        if calendar.window_start is None:
            return "all day"
        return f"{calendar.window_start:%H:%M}-{calendar.window_end:%H:%M}"

    @admin.display(description="next allowed time (from now)")
    def next_allowed_preview(self, calendar: Calendar) -> str:
        if not calendar.pk:
            return "shown after saving"
        try:
            rules = calendar.rules()
        except (RulesError, ValueError) as e:
            return f"cannot compute: {e}"
        stretches = rules.allowed_stretches(timezone.now(), PREVIEW_STRETCHES)
        if not stretches:
            return "no allowed time within the horizon"
        rows = ((_local(rules, start), _local(rules, end)) for start, end in stretches)
        return format_html("<ol>{}</ol>", format_html_join("", "<li>{} until {}</li>", rows))

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        calendar = self.get_object(request, object_id)
        extra_context = {**(extra_context or {}), **self.grid_context(calendar)}
        return super().change_view(request, object_id, form_url, extra_context)

    def grid_context(self, calendar: Calendar | None) -> dict[str, Any]:
        if calendar is None:
            return {}
        try:
            rules = calendar.rules()
        except (RulesError, ValueError) as e:
            return {"grid_error": str(e)}
        today = wall(rules.zone, timezone.now()).date()
        grid = month_grid(rules, today, GRID_MONTHS)
        return {"month_grid": grid, "grid_timezone": rules.timezone}

    def save_model(
        self, request: HttpRequest, obj: Calendar, form: forms.ModelForm, change: bool
    ) -> None:
        self.adopt(request, obj, change)
        super().save_model(request, obj, form, change)

    def save_related(
        self,
        request: HttpRequest,
        form: forms.ModelForm,
        formsets: list[forms.BaseInlineFormSet],
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)
        # Periods are saved with the inline: only now do the rules the jobs
        # depend on stand complete.
        calendar_changed.send(sender=Calendar, calendar=form.instance)


def _local(rules, instant):
    if instant is None:
        return "beyond the horizon"
    return shown(instant, rules.zone)
