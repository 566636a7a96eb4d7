"""Who owns a row that jobs-as-code may manage: a job, a calendar, a
concurrency group, a notification channel or rule (docs/design.md §5, §8).

`apply` creates, updates and prunes only what it manages, and only the rows
of the file (its source) that wrote them. A hand edit of an apply-managed
row, in the admin or through the management API, adopts it first: it passes
to whoever edited it, belongs to no file, and `apply --prune` leaves it
alone from then on, so jobs-as-code never silently undoes a hand edit.
"""

from typing import Any

from django.contrib import messages
from django.db import models
from django.http import HttpRequest, HttpResponse


class ManagedBy(models.TextChoices):
    APPLY = "apply", "apply (jobs as code)"
    API = "api", "the management API"
    ADMIN = "admin", "the admin"


class Owned(models.Model):
    """A named row of a project that apply may manage; Job, Calendar,
    ConcurrencyGroup, Check, Channel and Rule stand on it."""

    name = models.SlugField(max_length=100, unique=True)
    # The project (team) the row belongs to, by slug (projects.models): its
    # own column, so the loop's queries join nothing to know it.
    project = models.SlugField(
        max_length=100,
        default="default",
        # In the table too: a process of the previous release, still running
        # during a rolling deploy, inserts rows without the column.
        db_default="default",
        db_index=True,
        help_text="The project (team) it belongs to: who may see and change it.",
    )
    managed_by = models.CharField(
        "managed by",
        max_length=10,
        choices=ManagedBy.choices,
        default=ManagedBy.ADMIN,
        help_text="apply updates and prunes only what it manages; saving an "
        "apply-managed row here adopts it (apply no longer prunes it).",
    )
    managed_source = models.CharField(
        "managed by file",
        max_length=100,
        blank=True,
        default="",
        help_text="The apply source (a file's stem, or apply --source) that manages "
        "this row: apply --prune of that source alone deletes it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


def manager_text(row: Owned) -> str:
    """Who manages an apply-managed `row`, in words: "apply of file croniq"."""
    if row.managed_source:
        return f"apply of file {row.managed_source}"
    return "apply"


def own(row: Owned, managed_by: str, managed_source: str = "") -> None:
    """Mark `row` as written by `managed_by`: only apply's rows belong to a file."""
    row.managed_by = managed_by
    row.managed_source = managed_source if managed_by == ManagedBy.APPLY else ""


def adoption(row: Owned, by: str) -> dict[str, str] | None:
    """The data of the `<model>.adopted` audit event of a hand edit of `row`
    by `by` (the admin, the API), or None when apply does not manage it."""
    if row.managed_by != ManagedBy.APPLY:
        return None
    return {"from": ManagedBy.APPLY, "to": by, "source": row.managed_source}


def adopt(row: Owned, by: str) -> dict[str, str] | None:
    """A hand edit of `row` by `by`: when apply manages it, it passes to
    `by` and belongs to no file. Returns `adoption`'s audit data."""
    data = adoption(row, by)
    if data is not None:
        own(row, by)
    return data


class AdoptedOnSave:
    """For the admin of an Owned model: the change form of an apply-managed
    row warns, and saving it adopts it (audited `<model>.adopted`, through
    the admin's `audit`), so `apply --prune` no longer deletes it."""

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        obj = self.get_object(request, object_id)
        if (
            request.method == "GET"
            and obj is not None
            and obj.managed_by == ManagedBy.APPLY
            # Not for a row the page is about to refuse (another project's).
            and self.has_view_or_change_permission(request, obj)
        ):
            self.message_user(request, apply_warning(obj), messages.WARNING)
        return super().change_view(request, object_id, form_url, extra_context)

    def adopt(self, request: HttpRequest, obj: Owned, change: bool) -> list[str]:
        """Mark `obj` adopted before its save; returns the fields that changed."""
        data = adopt(obj, ManagedBy.ADMIN) if change else None
        if data is None:
            return []
        self.audit(request, obj, "adopted", data)
        return ["managed_by", "managed_source"]


def apply_warning(obj: Owned) -> str:
    """What the change form of an apply-managed row says before an edit."""
    kind = obj._meta.verbose_name
    listing = f"{obj.managed_source}" if obj.managed_source else "a file that lists it"
    return (
        f"This {kind} is managed by {manager_text(obj)} (jobs as code): the next apply "
        f"of {listing} reverts edits made here. Saving adopts it, so apply --prune "
        f"no longer deletes it."
    )
