"""The dashboard's dead letters page and its replay and discard buttons.
Thin: the actions are in `scheduler.triage.dead_letter_actions`. The page
lists the dead letters of the projects the user sees; a button shows, and
acts, where the role in the letter's job's project allows it."""

from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from core import permissions
from dashboard import queries, seen
from dashboard.views import staff_action, staff_page
from projects import scoping
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter, with_status

PER_PAGE = 50
SHOWN = [*DeadLetter.STATUSES, "all"]


def dead_letters_page(user: Any, status: str, number: int, now: datetime) -> queries.Page:
    rows = seen.dead_letters(user, DeadLetter.objects.select_related("execution__job"))
    if status != "all":
        rows = rows.filter(with_status(status))
    page = queries.cheap_page(rows.order_by("-id"), number, PER_PAGE)
    for dead_letter in page.items:
        dead_letter.stale = dead_letter_actions.is_stale(dead_letter, now)
        dead_letter.may_replay = permissions.allows(user, "deadletter.replay", dead_letter)
        dead_letter.may_discard = permissions.allows(user, "deadletter.discard", dead_letter)
    return page


def acted_on(request: HttpRequest, pk: int, action: str) -> DeadLetter:
    """The dead letter `pk` among those the user sees (404 otherwise), if
    the user may do `action` to it (403 otherwise)."""
    rows = DeadLetter.objects.select_related("execution__job")
    dead_letter = get_object_or_404(seen.dead_letters(request.user, rows), pk=pk)
    permissions.require(request.user, action, dead_letter)
    return dead_letter


@staff_page("scheduler.view_deadletter")
def dead_letters(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", DeadLetter.OPEN)
    if status not in SHOWN:
        status = DeadLetter.OPEN
    number = queries.page_number(request.GET.get("page"))
    context = {
        "page": dead_letters_page(request.user, status, number, timezone.now()),
        # "Discard selected": where the user may discard some dead letter.
        "discards": scoping.may(request.user, "scheduler.discard_deadletter"),
        "status": status,
        "statuses": SHOWN,
        "query": urlencode({"status": status}),
        "max_age": dead_letter_actions.in_words(dead_letter_actions.replay_max_age()),
    }
    return render(request, "dashboard/dead_letters.html", context)


@staff_action("deadletter.replay")
def replay_dead_letter(request: HttpRequest, pk: int) -> HttpResponse:
    dead_letter = acted_on(request, pk, "deadletter.replay")
    force = request.POST.get("force") == "on"
    try:
        new = dead_letter_actions.replay(dead_letter, timezone.now(), request.user, force=force)
    except OperationRefused as e:
        messages.warning(request, str(e))
        return redirect("dashboard:dead-letters")
    messages.success(request, f"Dead letter {pk} replayed as run {new.pk}.")
    return redirect("dashboard:execution", new.pk)


@staff_action("deadletter.discard")
def discard_dead_letter(request: HttpRequest, pk: int) -> HttpResponse:
    acted_on(request, pk, "deadletter.discard")
    if dead_letter_actions.discard(DeadLetter.objects.filter(pk=pk), timezone.now(), request.user):
        messages.success(request, f"Dead letter {pk} discarded.")
    else:
        messages.info(request, f"Dead letter {pk} was replayed or discarded already.")
    return redirect("dashboard:dead-letters")


@staff_action("deadletter.discard")
def discard_dead_letters(request: HttpRequest) -> HttpResponse:
    ids = [value for value in request.POST.getlist("ids") if value.isdigit() and len(value) < 19]
    if not ids:
        messages.error(request, "Nothing discarded: select the dead letters to discard.")
        return redirect("dashboard:dead-letters")
    rows = DeadLetter.objects.filter(pk__in=[int(value) for value in ids])
    # All or nothing: one the user may not discard refuses the lot, unchanged.
    for dead_letter in rows.select_related("execution__job"):
        if not permissions.allows(request.user, "deadletter.discard", dead_letter):
            raise PermissionDenied(f"you may not discard dead letter {dead_letter.pk}")
    count = dead_letter_actions.discard(rows, timezone.now(), request.user)
    messages.success(request, f"Discarded {count} dead letter(s).")
    return redirect("dashboard:dead-letters")
