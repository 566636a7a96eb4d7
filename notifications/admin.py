import json
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, URLResolver, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from audit.audited_admin import AuditedModelAdmin
from audit.changes import MASK, diff, snapshot
from core.admin_mixins import CheapPaginator, ReadOnlyModelAdmin
from core.ownership import AdoptedOnSave
from notifications.admin_forms import ChannelForm, MuteForm, RuleForm
from notifications.applyitems import masked_channel_diff, masked_url
from notifications.models import Channel, Delivery, Mute, Notification, Rule
from projects.admin_scoping import ProjectScoped

ERROR_SHOWN = 80  # characters of a delivery error in lists


@admin.register(Channel)
class ChannelAdmin(ProjectScoped, AdoptedOnSave, AuditedModelAdmin):
    form = ChannelForm
    list_display = ["name", "project", "kind", "target", "enabled", "managed_by"]
    list_filter = ["kind", "enabled"]
    # Never the url: a chat webhook's URL is its secret, and a search that
    # matches it tells a viewer its characters one by one.
    search_fields = ["name"]
    readonly_fields = ["managed_by", "managed_source"]
    actions = ["send_test"]
    fieldsets = [
        (None, {"fields": ["name", "project", "kind", "enabled"]}),
        ("Email", {"fields": ["to"]}),
        (
            "Webhook and chat",
            {"fields": ["url", "secret", "headers", "format", "timeout", "username"]},
        ),
        ("Managed", {"fields": ["managed_by", "managed_source"]}),
    ]

    # Who may only look at a channel sees header values and the path of a
    # literal URL masked (a chat webhook's URL is its secret), as a job's
    # secret-looking env values are; who may change it edits the real ones.
    MASKED = {"url": "url_masked", "headers": "headers_masked"}

    def get_fieldsets(
        self, request: HttpRequest, obj: Channel | None = None
    ) -> list[tuple[str | None, dict[str, Any]]]:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        return [
            (title, {**options, "fields": [self.MASKED.get(f, f) for f in options["fields"]]})
            for title, options in fieldsets
        ]

    def get_list_display(self, request: HttpRequest) -> list[str]:
        shown = super().get_list_display(request)
        # One list for every row: unmasked only when the user may change them all.
        if self.changes_all_it_sees(request):
            return shown
        return ["target_masked" if f == "target" else f for f in shown]

    @admin.display(description="sends to")
    def target(self, channel: Channel) -> str:
        return ", ".join(channel.to) if channel.kind == Channel.EMAIL else channel.url

    @admin.display(description="sends to")
    def target_masked(self, channel: Channel) -> str:
        return ", ".join(channel.to) if channel.kind == Channel.EMAIL else masked_url(channel.url)

    @admin.display(description="url")
    def url_masked(self, channel: Channel) -> str:
        return masked_url(channel.url)

    @admin.display(description="headers")
    def headers_masked(self, channel: Channel) -> str:
        return "\n".join(f"{name}: {MASK}" for name in channel.headers) or "—"

    def audit(
        self, request: HttpRequest, obj: Channel, verb: str, data: dict[str, Any] | None = None
    ) -> Any:
        # Header values and URL paths may hold secrets: never in the trail.
        # (An adoption's data says who owned it, not a diff.)
        if verb != "adopted":
            data = masked_channel_diff(data or {})
        return super().audit(request, obj, verb, data)

    # The secret is a reference, so (masked) it joins the diff: a changed
    # secret is audited like any other change.
    def channel_snapshot(self, channel: Channel) -> dict[str, Any]:
        return {**snapshot(channel, self.audit_exclude), "secret": channel.secret}

    def stored_snapshot(self, obj: Channel) -> dict[str, Any]:
        stored = Channel.objects.filter(pk=obj.pk).first()
        return self.channel_snapshot(stored) if stored is not None else {}

    def save_model(self, request: HttpRequest, obj: Channel, form: ModelForm, change: bool) -> None:
        self.adopt(request, obj, change)
        super().save_model(request, obj, form, change)

    def audit_saved(
        self, request: HttpRequest, obj: Channel, before: dict[str, Any], change: bool
    ) -> Any:
        changes = diff(before, self.channel_snapshot(obj))
        if change and not changes:
            return None
        return self.audit(request, obj, "changed" if change else "created", changes)

    def audit_deleted(self, request: HttpRequest, obj: Channel) -> Any:
        return self.audit(request, obj, "deleted", diff(self.channel_snapshot(obj), {}))

    def get_urls(self) -> list[URLPattern | URLResolver]:
        test = path(
            "<path:object_id>/test/",
            self.admin_site.admin_view(self.test_view),
            name="notifications_channel_test",
        )
        return [test, *super().get_urls()]

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Channel | None = None,
    ) -> HttpResponse:
        context["can_send_test"] = obj is not None and self.has_test_permission(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)

    def has_test_permission(self, request: HttpRequest, obj: Channel | None = None) -> bool:
        # A test reaches real people: whoever may change the channel may test it.
        return self.has_change_permission(request, obj)

    def test_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        channel = get_object_or_404(Channel, pk=object_id)
        if not self.has_test_permission(request, channel):
            raise PermissionDenied("sending a test notification needs notifications.change_channel")
        self.send_one_test(request, channel)
        return HttpResponseRedirect(
            reverse("admin:notifications_channel_change", args=[channel.pk])
        )

    @admin.action(description="Send a test notification", permissions=["test"])
    def send_test(self, request: HttpRequest, queryset: QuerySet) -> None:
        for channel in queryset:
            self.send_one_test(request, channel)

    def send_one_test(self, request: HttpRequest, channel: Channel) -> None:
        from notifications.delivery import send_test

        # A failed try (an unset secret, a refusing receiver) is a Result too.
        result = send_test(channel, timezone.now(), request.user)
        status = f" (status {result.status_code})" if result.status_code else ""
        if result.ok:
            self.message_user(
                request,
                f"{channel}: test notification delivered{status} in {result.latency:.2f} s.",
                messages.SUCCESS,
            )
        else:
            self.message_user(
                request,
                f"{channel}: test notification failed{status}: {result.error}",
                messages.ERROR,
            )


@admin.register(Rule)
class RuleAdmin(ProjectScoped, AdoptedOnSave, AuditedModelAdmin):
    form = RuleForm
    list_display = [
        "name",
        "project",
        "events_text",
        "channels_text",
        "jobs",
        "owner",
        "enabled",
        "managed_by",
    ]
    list_filter = [
        "enabled",
        "fallback",
        "digest",
        ("channels", admin.RelatedOnlyFieldListFilter),
    ]
    search_fields = ["name", "jobs", "owner"]
    readonly_fields = ["managed_by", "managed_source"]
    fieldsets = [
        (None, {"fields": ["name", "project", "enabled", "events"]}),
        (
            "Filters",
            {
                "fields": ["jobs", "checks", "labels", "owner", "calendar", "fallback"],
                "description": "An event matches when its job passes every filter that is set.",
            },
        ),
        ("Thresholds", {"fields": ["failures_in_a_row", "slow_factor", "grace"]}),
        ("Delivery", {"fields": ["channels", "throttle", "digest"]}),
        ("Managed", {"fields": ["managed_by", "managed_source"]}),
    ]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).prefetch_related("channels")

    @admin.display(description="events")
    def events_text(self, rule: Rule) -> str:
        return ", ".join(rule.events)

    @admin.display(description="channels")
    def channels_text(self, rule: Rule) -> str:
        return ", ".join(c.name for c in rule.channels.all())

    def rule_snapshot(self, rule: Rule) -> dict[str, Any]:
        names = sorted(c.name for c in rule.channels.all()) if rule.pk else []
        return {**snapshot(rule, self.audit_exclude), "channels": names}

    # The channels are saved after the rule (save_related): audit once both are.
    def save_model(self, request: HttpRequest, obj: Rule, form: ModelForm, change: bool) -> None:
        stored = Rule.objects.filter(pk=obj.pk).first() if change else None
        form.audit_before = self.rule_snapshot(stored) if stored else {}
        self.adopt(request, obj, change)
        obj.save()

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: list[Any], change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        changes = diff(form.audit_before, self.rule_snapshot(form.instance))
        if changes or not change:
            self.audit(request, form.instance, "changed" if change else "created", changes)


@admin.register(Mute)
class MuteAdmin(AuditedModelAdmin):
    """Mutes are made and ended through `notifications.mutes`, which audits
    them (`notification.muted`, `notification.unmuted`); a mute once made is
    read-only: end it, or delete it (audited as `mute.deleted`)."""

    form = MuteForm
    list_display = ["subject", "until", "active", "note", "created_by", "created_at"]
    list_select_related = ["rule", "job"]
    raw_id_fields = ["job"]
    actions = ["end_now"]

    @admin.display(description="muted")
    def subject(self, mute: Mute) -> object:
        return mute.rule or mute.job or "everything"

    @admin.display(description="active", boolean=True)
    def active(self, mute: Mute) -> bool:
        return mute.until > timezone.now()

    def get_readonly_fields(self, request: HttpRequest, obj: Mute | None = None) -> list[str]:
        if obj is None:
            return ["created_by", "created_at"]
        return ["rule", "job", "until", "note", "created_by", "created_at"]

    def save_model(self, request: HttpRequest, obj: Mute, form: ModelForm, change: bool) -> None:
        if change:
            return  # nothing to write: a mute's fields are read-only
        from notifications.mutes import mute

        made = mute(
            rule=obj.rule,
            job=obj.job,
            until=obj.until,
            note=obj.note,
            actor=request.user,
            now=timezone.now(),
        )
        # The admin goes on with `obj` (its history entry, the redirect).
        obj.pk, obj.note, obj.created_by, obj.created_at = (
            made.pk,
            made.note,
            made.created_by,
            made.created_at,
        )
        obj._state.adding = False

    def has_end_permission(self, request: HttpRequest) -> bool:
        return self.has_change_permission(request)

    @admin.action(description="End selected mutes now", permissions=["end"])
    def end_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        from notifications.mutes import unmute

        now = timezone.now()
        ended = sum(unmute(m, request.user, now) for m in queryset.select_related("rule", "job"))
        self.message_user(request, f"Ended {ended} mute(s).")


class DeliveryInline(admin.TabularInline):
    model = Delivery
    extra = 0
    fields = ["attempt", "at", "ok", "status_code", "latency", "error"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Notification | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Notification | None = None) -> bool:
        return False


@admin.register(Notification)
class NotificationAdmin(ReadOnlyModelAdmin):
    list_display = [
        "created_at",
        "name",
        "job",
        "channel",
        "state",
        "attempts",
        "last_status",
        "last_error_short",
    ]
    list_filter = ["state", "channel", "name"]
    search_fields = ["job__name"]
    list_select_related = ["job", "channel"]
    show_full_result_count = False
    paginator = CheapPaginator
    inlines = [DeliveryInline]
    fields = [
        "id",
        "name",
        "state",
        "channel",
        "rule",
        "job",
        "event",
        "group",
        "created_at",
        "next_attempt_at",
        "attempts",
        "delivered_at",
        "last_status",
        "last_error",
        "claimed_by",
        "claimed_until",
        "message_json",
    ]
    readonly_fields = fields

    @admin.display(description="last error")
    def last_error_short(self, notification: Notification) -> str:
        error = notification.last_error
        return error if len(error) <= ERROR_SHOWN else error[: ERROR_SHOWN - 1] + "…"

    @admin.display(description="message")
    def message_json(self, notification: Notification) -> str:
        text = json.dumps(notification.message, indent=2, sort_keys=True, default=str)
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", text)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyModelAdmin):
    list_display = ["at", "notification", "attempt", "ok", "status_code", "latency", "error"]
    list_filter = ["ok"]
    list_select_related = ["notification"]
    show_full_result_count = False
    paginator = CheapPaginator
