"""The admin's maintenance pages: the global switch (one row) and the
windows (added and deleted, never edited). Every change goes through
`scheduler.runs.maintenance`, which audits it."""

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone

from core.admin_mixins import FilterLookupsOnly
from scheduler.models import MaintenanceSwitch, MaintenanceWindow
from scheduler.runs import maintenance


@admin.register(MaintenanceSwitch)
class MaintenanceSwitchAdmin(FilterLookupsOnly, admin.ModelAdmin):
    fields = ["on", "reason", "changed_at"]
    readonly_fields = ["changed_at"]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # One switch: its list is its page.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = maintenance.switch()
        return redirect(reverse("admin:scheduler_maintenanceswitch_change", args=[row.pk]))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: MaintenanceSwitch | None = None
    ) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: MaintenanceSwitch, form: ModelForm, change: bool
    ) -> None:
        maintenance.set_switch(obj.on, timezone.now(), request.user, reason=obj.reason)


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(FilterLookupsOnly, admin.ModelAdmin):
    list_display = ["start", "end", "labels", "reason", "created_at"]
    fields = ["start", "end", "labels", "reason"]

    def has_change_permission(
        self, request: HttpRequest, obj: MaintenanceWindow | None = None
    ) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def save_model(
        self, request: HttpRequest, obj: MaintenanceWindow, form: ModelForm, change: bool
    ) -> None:
        maintenance.save_window(obj, timezone.now(), request.user)

    def delete_model(self, request: HttpRequest, obj: MaintenanceWindow) -> None:
        maintenance.delete_window(obj, timezone.now(), request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for window in queryset:
            maintenance.delete_window(window, timezone.now(), request.user)
