import secrets

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html

from audit.audited_admin import AuditedModelAdmin
from core import permissions
from core.admin_mixins import ShowsSecretOnce
from dispatch import identity
from runners.models import TOKEN_PREFIX, Runner, RunnerToken, hash_secret


@admin.register(Runner)
class RunnerAdmin(AuditedModelAdmin):
    """Runners register themselves; operators drain, resume or forget them."""

    list_display = [
        "name",
        "state_badge",
        "flapping_badge",
        "labels_list",
        "last_seen_at",
        "takeover_count",
        "capacity",
        "hostname",
        "version",
        "token",
    ]
    list_filter = ["state", "flapping"]
    search_fields = ["name", "hostname"]
    list_select_related = ["token"]
    readonly_fields = [
        "name",
        "token",
        "labels",
        "version",
        "features",
        "hostname",
        "capacity",
        "session",
        "state",
        "registered_at",
        "last_seen_at",
        "takeover_count",
        "flapping",
        "flapping_since",
    ]
    actions = ["drain", "resume", "forget"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Runner | None = None) -> bool:
        # Deleting would leave its executions "running"; "forget" releases them.
        return False

    @admin.display(description="state", ordering="state")
    def state_badge(self, runner: Runner) -> str:
        colours = {Runner.ONLINE: "#2e7d32", Runner.DRAINING: "#ef6c00", Runner.OFFLINE: "#757575"}
        return format_html(
            '<span style="color:{}; font-weight:bold">{}</span>',
            colours[runner.state],
            runner.state,
        )

    @admin.display(description="flapping", ordering="flapping")
    def flapping_badge(self, runner: Runner) -> str:
        if not runner.flapping:
            return "—"
        return format_html(
            '<span title="since {}" style="background:#c62828; color:#fff; padding:1px 6px;'
            ' border-radius:8px">flapping</span>',
            runner.flapping_since,
        )

    @admin.display(description="labels")
    def labels_list(self, runner: Runner) -> str:
        return ", ".join(runner.labels) or "—"

    def has_drain_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "runner.drain")

    def has_resume_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "runner.resume")

    def has_forget_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "runner.forget")

    @admin.action(description="Drain: finish current work, take no new", permissions=["drain"])
    def drain(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        count = sum(identity.drain(r, now, actor=request.user) for r in queryset)
        self.message_user(request, f"{count} runner(s) draining.")

    @admin.action(description="Resume: take new work again", permissions=["resume"])
    def resume(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        count = sum(identity.resume(r, now, actor=request.user) for r in queryset)
        self.message_user(request, f"{count} runner(s) resumed.")

    @admin.action(
        description="Forget: release its executions now and drop its token binding",
        permissions=["forget"],
    )
    def forget(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        runners = list(queryset)
        released = sum(len(identity.forget(r, now, actor=request.user)) for r in runners)
        self.message_user(
            request, f"{len(runners)} runner(s) forgotten, {released} execution(s) released."
        )


@admin.register(RunnerToken)
class RunnerTokenAdmin(ShowsSecretOnce, AuditedModelAdmin):
    """Create shows the secret once; revoke frees the names the token bound."""

    shown_once_note = "Its secret is shown only now: Croniq keeps only its hash."

    list_display = ["name", "created_at", "last_used_at", "revoked_at", "runner_names"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name"]
    actions = ["revoke"]

    def get_readonly_fields(
        self, request: HttpRequest, obj: RunnerToken | None = None
    ) -> list[str]:
        if obj is None:
            return []
        return ["name", "created_at", "last_used_at", "revoked_at"]

    def get_fields(self, request: HttpRequest, obj: RunnerToken | None = None) -> list[str]:
        if obj is None:
            return ["name"]
        return ["name", "created_at", "last_used_at", "revoked_at"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).prefetch_related("runners")

    @admin.display(description="runners")
    def runner_names(self, token: RunnerToken) -> str:
        return ", ".join(r.name for r in token.runners.all()) or "—"

    def save_model(
        self, request: HttpRequest, obj: RunnerToken, form: forms.ModelForm, change: bool
    ) -> None:
        if not change:
            # Shown once by the add view's answer (ShowsSecretOnce), never stored.
            obj.shown_once_secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
            obj.secret_hash = hash_secret(obj.shown_once_secret)
        super().save_model(request, obj, form, change)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return permissions.allows(request.user, "token.revoke")

    @admin.action(
        description="Revoke: refuse its calls and free the names it bound", permissions=["revoke"]
    )
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        now = timezone.now()
        count = sum(identity.revoke(t, now, actor=request.user) for t in queryset)
        self.message_user(request, f"{count} token(s) revoked.")
