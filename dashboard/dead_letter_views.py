"""The dashboard's dead letters page and its replay and discard buttons.
Thin: the actions are in `scheduler.triage.dead_letter_actions`."""

from datetime import datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from dashboard import queries
from dashboard.views import staff_action, staff_page
from scheduler.runs.refusals import OperationRefused
from scheduler.triage import dead_letter_actions
from scheduler.triage.dead_letters import DeadLetter, with_status

PER_PAGE = 50
SHOWN = [*DeadLetter.STATUSES, "all"]


def dead_letters_page(status: str, number: int, now: datetime) -> queries.Page:
    rows = DeadLetter.objects.select_related("execution__job").order_by("-id")
    if status != "all":
        rows = rows.filter(with_status(status))
    page = queries.cheap_page(rows, number, PER_PAGE)
    for dead_letter in page.items:
        dead_letter.stale = dead_letter_actions.is_stale(dead_letter, now)
    return page


@staff_page("scheduler.view_deadletter")
def dead_letters(request: HttpRequest) -> HttpResponse:
    status = request.GET.get("status", DeadLetter.OPEN)
    if status not in SHOWN:
        status = DeadLetter.OPEN
    number = queries.page_number(request.GET.get("page"))
    context = {
        "page": dead_letters_page(status, number, timezone.now()),
        "status": status,
        "statuses": SHOWN,
        "query": urlencode({"status": status}),
        "max_age": dead_letter_actions.in_words(dead_letter_actions.replay_max_age()),
    }
    return render(request, "dashboard/dead_letters.html", context)


@staff_action("deadletter.replay")
def replay_dead_letter(request: HttpRequest, pk: int) -> HttpResponse:
    dead_letter = get_object_or_404(DeadLetter.objects.select_related("execution__job"), pk=pk)
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
    get_object_or_404(DeadLetter, pk=pk)
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
    count = dead_letter_actions.discard(rows, timezone.now(), request.user)
    messages.success(request, f"Discarded {count} dead letter(s).")
    return redirect("dashboard:dead-letters")
