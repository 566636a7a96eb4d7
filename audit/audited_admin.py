"""The admin base every app's admin of a changeable model stands on.

`AuditedModelAdmin` writes an AuditEvent for every add, change and delete
made in the admin (invariant 4: operator actions are audited), with the user
as actor and a field diff as data. The admin kit with no audit in it
(filters, paging, read-only, secrets shown once) is `core.admin_mixins`.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse

import audit
from audit.changes import diff, snapshot
from audit.models import AuditEvent
from core.admin_mixins import FilterLookupsOnly


class AuditedModelAdmin(FilterLookupsOnly, admin.ModelAdmin):
    """A ModelAdmin whose adds, changes and deletes are audited.

    Actions are named `<model name>.created|changed|deleted` (e.g.
    `job.changed`, `runnertoken.deleted`); data is `{"field": [old, new]}`.
    Fields whose name contains "secret" or "password", and those listed in
    `audit_exclude`, are never recorded. Inline objects saved through the
    same form are audited the same way under their own model name.
    """

    audit_exclude = ()

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if request.method == "POST":
            self.refuse_forbidden_action(request)
        return super().changelist_view(request, extra_context)

    def refuse_forbidden_action(self, request: HttpRequest) -> None:
        """Django leaves an action the user may not use out of the form and
        answers "No action selected" (or ignores the POST when none is left):
        refuse it with a 403 like any other missing permission."""
        name = request.POST.get("action", "")
        known = {a if isinstance(a, str) else a.__name__ for a in self.actions or ()}
        known |= set(dict(self.admin_site.actions))
        if name in known and name not in self.get_actions(request):
            raise PermissionDenied(f"you may not use the action {name}")

    def audit(
        self,
        request: HttpRequest,
        obj: models.Model,
        verb: str,
        data: dict[str, Any] | None = None,
    ) -> AuditEvent:
        """Record an admin action on `obj` by the requesting user; custom
        admin actions call it too, e.g. `self.audit(request, job, "paused")`."""
        return audit.record(
            f"{obj._meta.model_name}.{verb}", target=obj, actor=request.user, data=data or {}
        )

    def save_model(
        self, request: HttpRequest, obj: models.Model, form: forms.ModelForm, change: bool
    ) -> None:
        before = self.stored_snapshot(obj) if change else {}
        super().save_model(request, obj, form, change)
        self.audit_saved(request, obj, before, change)

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        with transaction.atomic():
            self.audit_deleted(request, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        with transaction.atomic():
            for obj in queryset:
                self.audit_deleted(request, obj)
            super().delete_queryset(request, queryset)

    def save_formset(
        self,
        request: HttpRequest,
        form: forms.ModelForm,
        formset: forms.BaseModelFormSet,
        change: bool,
    ) -> None:
        deleted = {id(f.instance) for f in formset.deleted_forms}
        before = {}
        for inline_form in formset.initial_forms:
            obj = inline_form.instance
            if id(obj) in deleted:
                self.audit_deleted(request, obj)
            elif inline_form.has_changed():
                before[obj.pk] = self.stored_snapshot(obj)
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects:
            self.audit_saved(request, obj, {}, change=False)
        for obj, _ in formset.changed_objects:
            self.audit_saved(request, obj, before.get(obj.pk, {}), change=True)

    def stored_snapshot(self, obj: models.Model) -> dict[str, Any]:
        """The row as the database holds it, before the form's values are saved."""
        stored = type(obj)._default_manager.filter(pk=obj.pk).first()
        return snapshot(stored, self.audit_exclude) if stored is not None else {}

    def audit_saved(
        self, request: HttpRequest, obj: models.Model, before: dict[str, Any], change: bool
    ) -> AuditEvent | None:
        changes = diff(before, snapshot(obj, self.audit_exclude))
        if change and not changes:
            return None
        return self.audit(request, obj, "changed" if change else "created", changes)

    def audit_deleted(self, request: HttpRequest, obj: models.Model) -> AuditEvent:
        return self.audit(request, obj, "deleted", diff(snapshot(obj, self.audit_exclude), {}))
