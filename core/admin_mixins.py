"""Admin building blocks shared by every app's admin.

`FilterLookupsOnly` keeps the query string of a changelist to the lookups of
its sidebar filters, so a user who may only view a model cannot match its
hidden values a character at a time. `ShowsSecretOnce` shows a new secret on
one page instead of in a message. `CheapPaginator` keeps changelists of big
tables from counting every row. `ReadOnlyModelAdmin` lets nobody add, change
or delete. The audited admin base, which writes an AuditEvent for every
change, is `audit.audited_admin.AuditedModelAdmin`.
"""

from django.contrib import admin
from django.contrib.admin import widgets
from django.contrib.admin.utils import get_fields_from_path
from django.core.paginator import Paginator
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.text import capfirst

# The query string parameters Django's own field filters write: `path` (all
# values), `path__exact` (choices, booleans), `path__isnull`, `path__isempty`
# (empty or not), `path__gte` and `path__lt` (dates); a relation's
# `path__<target>__exact` is added by `field_filter_lookups`.
FIELD_FILTER_SUFFIXES = ("", "__exact", "__isnull", "__isempty", "__gte", "__lt")
DATE_HIERARCHY_PARTS = ("year", "month", "day")


class FilterLookupsOnly:
    """A ModelAdmin mixin: the changelist filters only on what its sidebar
    offers (`list_filter`, `date_hierarchy`) and on what a raw-id popup of a
    `limit_choices_to` relation asks for.

    Django allows a lookup on any field of the model itself, so a user who may
    only view channels asks `?url__startswith=https://hooks.slack.com/a` and
    reads a masked webhook URL one character at a time (the same for a job's
    `?env__DB_PASSWORD__startswith=` or a token's hash). Any other lookup is
    refused with Django's usual answer to one: a 400, nothing filtered.
    """

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup in self.filter_lookups(request) or (lookup, value) in self.popup_lookups()

    def filter_lookups(self, request: HttpRequest | None) -> set[str]:
        """The query string parameters this admin's filters write."""
        lookups = set()
        if self.date_hierarchy:
            lookups |= {f"{self.date_hierarchy}__{part}" for part in DATE_HIERARCHY_PARTS}
        for item in self.get_list_filter(request):
            if isinstance(item, type) and issubclass(item, admin.SimpleListFilter):
                lookups.add(item.parameter_name)
            else:
                path = item[0] if isinstance(item, (list, tuple)) else item
                lookups |= field_filter_lookups(self.model, path)
        return lookups

    def popup_lookups(self) -> set[tuple[str, str]]:
        """(lookup, value) pairs the raw-id popup of a ForeignKey to this model
        declared with `limit_choices_to` puts in its URL (as Django allows)."""
        pairs = set()
        for limit in self.model._meta.related_fkey_lookups:
            limit = limit() if callable(limit) else limit
            pairs |= set(widgets.url_params_from_lookup_dict(limit).items())
        return pairs


def field_filter_lookups(model: type[models.Model], path: str) -> set[str]:
    """What Django's field filter on `path` may write in the query string."""
    lookups = {path + suffix for suffix in FIELD_FILTER_SUFFIXES}
    field = get_fields_from_path(model, path)[-1]
    if field.is_relation:
        lookups.add(f"{path}__{field.target_field.name}__exact")
    return lookups


class ShowsSecretOnce:
    """A ModelAdmin mixin for rows made with a secret Croniq keeps only as its
    hash (API keys, runner tokens). `save_model` of an add sets the new secret
    on the object as `shown_once_secret`; the add view then answers a page
    that shows it, once, instead of the usual redirect.

    Not a message: Django keeps messages in a cookie that is signed, not
    encrypted, so the secret would sit in the browser's cookie store and in
    any log of request headers; and the session would keep it in the
    database. The admin's pages are sent with `Cache-Control: no-store`.
    """

    shown_once_template = "admin/shown_once.html"
    shown_once_note = "It is shown only now: Croniq keeps only its hash."

    def response_add(
        self, request: HttpRequest, obj: models.Model, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(obj, "shown_once_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        return TemplateResponse(
            request, self.shown_once_template, self.shown_once_context(request, obj, secret)
        )

    def shown_once_context(self, request: HttpRequest, obj: models.Model, secret: str) -> dict:
        opts = self.opts
        admin_url = f"{self.admin_site.name}:{opts.app_label}_{opts.model_name}"
        return {
            **self.admin_site.each_context(request),
            "title": f"{capfirst(opts.verbose_name)} {obj} created",
            "opts": opts,
            "object": obj,
            "secret": secret,
            "note": self.shown_once_note,
            "changelist_url": reverse(f"{admin_url}_changelist"),
            "add_url": reverse(f"{admin_url}_add"),
        }


class CheapPaginator(Paginator):
    """Counts at most `count_limit` rows (a bounded `COUNT` over a `LIMIT`
    subquery), so a changelist over a million rows stays fast. Pages past
    the limit are reached by filtering."""

    count_limit = 10_000

    @cached_property
    def count(self) -> int:
        return self.object_list[: self.count_limit].count()


class ReadOnlyModelAdmin(FilterLookupsOnly, admin.ModelAdmin):
    """Viewable by whoever may view the model; nobody adds, changes or deletes."""

    actions = None

    def has_add_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False
