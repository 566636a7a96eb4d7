"""The overview's bulk actions: pause, resume or run the jobs ticked, or
every job the filter matches, after a confirmation naming the action and
how many jobs. Thin: what is acted on, and how, is `dashboard.bulk`."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from core import permissions
from dashboard import bulk
from dashboard.views import pause_reason_problem, staff_only
from projects import scoping


@staff_only
@require_POST
def bulk_jobs(request: HttpRequest) -> HttpResponse:
    """The first post answers the confirmation; the post that carries its
    `confirm` acts, if the jobs are still those it named. The user's
    permission is checked for each job on both: one the user may not act on
    is left alone (and named); 403 when there is none the user may act on."""
    now = timezone.now()
    try:
        action, scope, job_filter, names = bulk.read(request.POST)
        selection = bulk.select(request.user, action, scope, job_filter, names, now)
    except bulk.BulkError as e:
        return HttpResponseBadRequest(str(e), content_type="text/plain; charset=utf-8")
    permission = selection.permission
    needed = permissions.ACTIONS[permission]
    if not selection.jobs and (selection.refused or not scoping.may(request.user, needed)):
        raise PermissionDenied(f"{permission} needs the permission {needed}")
    back = reverse("dashboard:overview") + (f"?{job_filter.query()}" if job_filter else "")
    if not selection.jobs:
        where = "is ticked" if scope == bulk.SELECTED else "matches the filter"
        messages.info(request, f"Nothing to {action}: no job {where}.")
        return redirect(back)
    reason = request.POST.get("reason", "").strip()
    confirm = request.POST.get("confirm", "")
    problem = ""
    if confirm and confirm == selection.digest:
        problem = pause_reason_problem(reason) if action == "pause" else ""
        if not problem:
            outcome = bulk.carry_out(selection, request.user, now, reason=reason)
            messages.success(request, bulk.summary(selection, outcome, reason))
            if selection.refused:
                messages.warning(request, left_alone(selection))
            return redirect(back)
    # Confirmed for other jobs than the filter or the ticks find now: ask again.
    changed = bool(confirm) and confirm != selection.digest
    context = {
        "selection": selection,
        "count": len(selection.jobs),
        "shown": selection.jobs[: bulk.NAMES_SHOWN],
        "more": max(0, len(selection.jobs) - bulk.NAMES_SHOWN),
        "left_alone": left_alone(selection) if selection.refused else "",
        "job_filter": job_filter,
        "reason": reason,
        "problem": problem,
        "changed": changed,
        "back": back,
    }
    return render(request, "dashboard/bulk_confirm.html", context, status=409 if changed else 200)


def left_alone(selection: bulk.Selection) -> str:
    names = ", ".join(selection.refused[:10])
    more = f" and {len(selection.refused) - 10} more" if len(selection.refused) > 10 else ""
    return (
        f"You may not {selection.action} {len(selection.refused)} of the jobs: "
        f"{names}{more}; they are left alone."
    )
