"""Secrets in the admin: write-only. The value field is never filled in,
the list shows names and dates, and every change is audited without its
value (vault.store). Only the Croniq admins hold the permissions, and a
project's admins for its own secrets; a secret stays in the project it was
made in (jobs name it there)."""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.http import HttpRequest
from django.utils import timezone

from audit.audited_admin import AuditedModelAdmin
from projects.admin_scoping import ProjectScoped
from vault import store
from vault.models import Secret


class SecretForm(forms.ModelForm):
    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        strip=False,
        required=False,
        help_text="Stored encrypted and never shown again. Leave empty to keep the current value.",
    )

    class Meta:
        model = Secret
        fields = ["name"]

    def clean_value(self) -> str:
        value = self.cleaned_data.get("value", "")
        if not value and self.instance.pk is None:
            raise ValidationError("a new secret needs a value")
        if value:
            try:
                store.check_value(value)
            except ValidationError as e:
                raise ValidationError(e.message_dict["value"]) from None
        return value


@admin.register(Secret)
class SecretAdmin(ProjectScoped, AuditedModelAdmin):
    form = SecretForm
    list_display = ["name", "project", "created_at", "updated_at"]
    search_fields = ["name"]
    fields = ["name", "value", "project", "created_at", "updated_at"]
    readonly_fields = ["created_at", "updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # Jobs name a secret in their project: renaming or moving one would
        # break them without a word.
        if obj is not None:
            return [*self.readonly_fields, "name", "project"]
        return list(self.readonly_fields)

    def save_model(
        self, request: HttpRequest, obj: Secret, form: forms.ModelForm, change: bool
    ) -> None:
        value = form.cleaned_data.get("value", "")
        if not value:
            return  # nothing to change: the name is read-only once created
        saved, _ = store.put(
            obj.name, value, project=obj.project, actor=request.user, now=timezone.now()
        )
        obj.pk, obj.ciphertext = saved.pk, saved.ciphertext

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        store.delete(obj, actor=request.user, now=timezone.now())

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        with transaction.atomic():
            for secret in queryset:
                store.delete(secret, actor=request.user, now=timezone.now())
