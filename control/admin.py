from datetime import datetime

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from audit.audited_admin import AuditedModelAdmin
from control import keys, scopes
from control.models import ApiKey, hash_secret, new_secret
from core.admin_mixins import ShowsSecretOnce
from projects.admin_scoping import ProjectScoped


class ApiKeyForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=[(scope, scope) for scope in scopes.ALL],
        widget=forms.CheckboxSelectMultiple,
        help_text="What the key may do (docs/design.md §8); admin is all of it.",
    )

    class Meta:
        model = ApiKey
        fields = ["name", "project", "scopes", "expires_at"]
        help_texts = {"expires_at": "Leave empty for a key that never expires."}

    def clean_scopes(self) -> list[str]:
        return scopes.parse(self.cleaned_data["scopes"])

    def clean_expires_at(self) -> datetime | None:
        expires_at = self.cleaned_data["expires_at"]
        if expires_at is not None and expires_at <= timezone.now():
            raise forms.ValidationError("The key would be expired already.")
        return expires_at


@admin.register(ApiKey)
class ApiKeyAdmin(ProjectScoped, ShowsSecretOnce, AuditedModelAdmin):
    """Create shows the key once; revoke ends it. A key is never edited or
    deleted: its name stays in the audit trail of what it did. A project's
    admins make and revoke the keys bound to it; a key of every project
    (a global key) is the Croniq admins' alone."""

    shown_once_note = "The key is shown only now: Croniq keeps only its hash."

    form = ApiKeyForm
    list_display = [
        "name",
        "project_text",
        "scopes_text",
        "created_at",
        "created_by",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    actions = ["revoke"]
    shown = [
        "name",
        "project",
        "scopes",
        "created_at",
        "created_by",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]

    def get_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        return ["name", "project", "scopes", "expires_at"] if obj is None else self.shown

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        return [] if obj is None else self.shown

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return False

    @admin.display(description="project", ordering="project")
    def project_text(self, key: ApiKey) -> str:
        return key.project or "every project"

    @admin.display(description="scopes")
    def scopes_text(self, key: ApiKey) -> str:
        return ", ".join(key.scopes)

    def save_model(
        self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm, change: bool
    ) -> None:
        if not change:
            # Shown once by the add view's answer (ShowsSecretOnce), never stored.
            obj.shown_once_secret = new_secret()
            obj.secret_hash = hash_secret(obj.shown_once_secret)
            obj.created_by = f"admin {request.user.get_username()}"
        super().save_model(request, obj, form, change)

    def has_revoke_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        return self.may_act(request, "apikey.revoke", obj)

    @admin.action(description="Revoke: its calls answer 401 from now on", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        count = sum(keys.revoke(key, now, actor=request.user) for key in queryset)
        self.message_user(request, f"{count} API key(s) revoked.")
