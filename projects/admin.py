"""Projects and their members in the admin (docs/design.md §11).

A project's page lists who holds which role in it. A project that still
holds rows (jobs, calendars, checks, channels, rules, secrets, keys) is not
deleted: its rows would name a project that is gone. `default` is never
deleted.
"""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit.audited_admin import AuditedModelAdmin
from projects import names, scoping
from projects.models import DEFAULT, Project, Role


class RoleInline(admin.TabularInline):
    model = Role
    extra = 1
    fields = ["role", "user", "group", "from_sso"]
    readonly_fields = ["from_sso"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return scoping.may(request.user, "projects.add_role", obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return scoping.may(request.user, "projects.change_role", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return scoping.may(request.user, "projects.delete_role", obj)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return scoping.may(request.user, "projects.view_role", obj)


@admin.register(Project)
class ProjectAdmin(AuditedModelAdmin):
    list_display = ["name", "description", "created_at"]
    search_fields = ["name", "description"]
    inlines = [RoleInline]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Rows name their project by its name: renaming would strand them.
        return ["name", "created_at"] if obj is not None else ["created_at"]

    def get_queryset(self, request: HttpRequest) -> Any:
        """A project admin sees the projects it administers; a viewer of
        every project, all of them."""
        rows = super().get_queryset(request)
        if scoping.everywhere(request.user, "projects.view_project"):
            return rows
        return rows.filter(name__in=scoping.projects_where(request.user, "projects.view_role"))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return scoping.everywhere(request.user, "projects.view_project") or scoping.may(
            request.user, "projects.view_role"
        )

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if scoping.everywhere(request.user, "projects.view_project"):
            return True
        return scoping.may(request.user, "projects.view_role", obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """A project admin changes its project's members (the inline); the
        project's own fields are the global admins'."""
        if scoping.everywhere(request.user, "projects.change_project"):
            return True
        return scoping.may(request.user, "projects.change_role", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and (obj.name == DEFAULT or names.holdings(obj.name)):
            return False
        return super().has_delete_permission(request, obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        deleted, count, perms_needed, protected = super().get_deleted_objects(objs, request)
        for project in objs:
            held = names.holdings(project.name)
            protected += [f"{project.name} holds {n} {what}" for what, n in held.items()]
        return deleted, count, perms_needed, protected

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        scoping.forget(request.user)  # its own roles may have changed
