import json

from django.contrib import admin
from django.contrib.auth import admin as auth_admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from audit.models import AuditEvent, Counter, Heartbeat
from core.admin_mixins import CheapPaginator, FilterLookupsOnly, ReadOnlyModelAdmin


class RecentValuesFilter(admin.SimpleListFilter):
    """Offers the values seen among the newest events: a DISTINCT over the
    whole table would scan it on every page view. Older values still filter
    by URL (?action=...)."""

    window = 10_000

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        newest = AuditEvent.objects.order_by("-at", "-id")[: self.window]
        values = set(newest.values_list(self.parameter_name, flat=True)) - {""}
        return [(value, value) for value in sorted(values)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(**{self.parameter_name: self.value()})
        return queryset


class ActionFilter(RecentValuesFilter):
    title = "action"
    parameter_name = "action"


class TargetTypeFilter(RecentValuesFilter):
    title = "target type"
    parameter_name = "target_type"


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyModelAdmin):
    list_display = ["at", "action", "actor_kind", "actor_name", "target_type", "target_repr"]
    list_filter = [ActionFilter, "actor_kind", TargetTypeFilter]
    search_fields = ["actor_name", "target_repr"]
    fields = [
        "at",
        "action",
        "actor_kind",
        "actor_name",
        "target_type",
        "target_id",
        "target_repr",
        "pretty_data",
    ]
    readonly_fields = fields
    paginator = CheapPaginator
    show_full_result_count = False
    list_per_page = 100

    @admin.display(description="data")
    def pretty_data(self, event: AuditEvent) -> str:
        return format_html("<pre>{}</pre>", json.dumps(event.data, indent=2, sort_keys=True))


@admin.register(Counter)
class CounterAdmin(ReadOnlyModelAdmin):
    list_display = ["name", "labels", "shard", "value"]
    search_fields = ["name", "labels"]
    ordering = ["name", "labels", "shard"]


@admin.register(Heartbeat)
class HeartbeatAdmin(ReadOnlyModelAdmin):
    list_display = ["name", "at"]


# Django's own user and group pages, held to the same lookups as Croniq's: a
# user who may view users would otherwise match password hashes with
# ?password__startswith=. (django.contrib.auth registers them first: it comes
# before audit in INSTALLED_APPS.)
admin.site.unregister(get_user_model())
admin.site.unregister(Group)


@admin.register(get_user_model())
class UserAdmin(FilterLookupsOnly, auth_admin.UserAdmin):
    pass


@admin.register(Group)
class GroupAdmin(FilterLookupsOnly, auth_admin.GroupAdmin):
    pass
