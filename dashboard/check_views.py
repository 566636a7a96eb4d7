"""The dashboard's check pages (docs/design.md §12): the checks with their
state, and a check with its recent pings. Read only, as the checks admin;
the reads are in `dashboard.check_queries`.

A check's ping URL carries its token, a credential (whoever reads it can
fake the check's pings): it shows only to users who may change the check,
the rule of the checks admin (`checks.admin`). "Run it in Croniq instead"
shows only to users who may add jobs: it opens the job admin's add form.
The pages show the checks of the projects the user sees.
"""

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from checks import items, retention, states
from dashboard import check_queries, queries, seen
from dashboard.views import admin_url, staff_page
from projects import scoping

# Who sees a check's ping URL, as in the checks admin; who may turn a check into a job.
SEES_PING_URL = "checks.change_check"
ADDS_JOBS = "scheduler.add_job"


@staff_page("checks.view_check")
def checks(request: HttpRequest) -> HttpResponse:
    state = request.GET.get("state", "")
    if state not in states.STATES:
        state = ""
    number = queries.page_number(request.GET.get("page"))
    visible = seen.checks(request.user)
    context = {
        "page": check_queries.checks_page(number, state, visible),
        "state": state,
        "counts": check_queries.state_counts(visible),
        "query": urlencode({"state": state}) if state else "",
    }
    return render(request, "dashboard/checks.html", context)


@staff_page("checks.view_check", "checks.view_ping")
def check_detail(request: HttpRequest, name: str) -> HttpResponse:
    check = get_object_or_404(seen.checks(request.user), name=name)
    number = queries.page_number(request.GET.get("page"))
    user = request.user
    context = {
        "check": check,
        "timing_words": check_queries.timing_words(check),
        "period_text": check_queries.every_text(check.period) if check.period else "",
        "grace_text": check_queries.every_text(check.grace),
        "page": check_queries.pings_page(check, number),
        "kept": retention.kept(),
        "ping_url": items.ping_url(check) if scoping.may(user, SEES_PING_URL, check) else None,
        "job_add_url": check_queries.job_add_url(check) if scoping.may(user, ADDS_JOBS) else None,
        "admin_url": admin_url("admin:checks_check_change", check.pk),
    }
    return render(request, "dashboard/check.html", context)
