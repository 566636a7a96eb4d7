"""The admin's maintenance pages: the global switch (one row) and the
windows (added and deleted, never edited). Every change goes through
`scheduler.runs.maintenance`, which audits it."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
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

    def changelist_view(self, request, extra_context=None):
        # One switch: its list is its page.
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        row = maintenance.switch()
        return redirect(reverse("admin:scheduler_maintenanceswitch_change", args=[row.pk]))

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        maintenance.set_switch(obj.on, timezone.now(), request.user, reason=obj.reason)


@admin.register(MaintenanceWindow)
class MaintenanceWindowAdmin(FilterLookupsOnly, admin.ModelAdmin):
    list_display = ["start", "end", "labels", "reason", "created_at"]
    fields = ["start", "end", "labels", "reason"]

    def has_change_permission(self, request, obj=None):
        return obj is None and super().has_change_permission(request, obj)

    def save_model(self, request, obj, form, change):
        maintenance.save_window(obj, timezone.now(), request.user)

    def delete_model(self, request, obj):
        maintenance.delete_window(obj, timezone.now(), request.user)

    def delete_queryset(self, request, queryset):
        for window in queryset:
            maintenance.delete_window(window, timezone.now(), request.user)
