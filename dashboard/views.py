"""The operator's dashboard: read-only pages over jobs, runs, runners and the
audit trail. Views stay thin; the reads are in `dashboard.queries`."""

from functools import wraps
from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, render
from django.template.defaultfilters import filesizeformat
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_safe

from dashboard import queries, schedules
from dashboard.charts import duration_chart
from dashboard.templatetags import dashboard_tags as tags
from scheduler.models import Execution, Job


def staff_required(view):
    """Anonymous users go to the admin login; signed-in non-staff get 403.
    The dashboard only reads: other methods than GET/HEAD get 405."""

    view = require_safe(view)

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (request.user.is_active and request.user.is_staff):
            raise PermissionDenied("The dashboard is for staff users.")
        return view(request, *args, **kwargs)

    return wrapper


def admin_url(name, *args):
    """The admin page for an object, or None while its model is not registered."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


@staff_required
def overview(request):
    now = timezone.now()
    search = request.GET.get("q", "").strip()
    page = queries.jobs_page(queries.page_number(request.GET.get("page")), search)
    results = queries.recent_results([job.pk for job in page.items])
    for job in page.items:
        job.recent = results.get(job.pk, [])
        job.schedule_words = schedules.describe(job)
    context = {
        "states": queries.state_counts(),
        "runners": queries.runner_counts(),
        "lag": queries.scheduler_lag(now),
        "page": page,
        "strip_length": queries.STRIP_LENGTH,
        "search": search,
        "query": urlencode({"q": search}) if search else "",
    }
    return render(request, "dashboard/overview.html", context)


@staff_required
def job_detail(request, name):
    now = timezone.now()
    job = get_object_or_404(Job.objects.select_related("calendar"), name=name)
    state = request.GET.get("state", "")
    if state not in dict(Execution.STATES):
        state = ""
    number = queries.page_number(request.GET.get("page"))
    context = {
        "job": job,
        "description": schedules.describe(job),
        "upcoming": schedules.upcoming(job, now),
        "page": queries.job_history(job, number, state),
        "state": state,
        "states": Execution.STATES,
        "query": urlencode({"state": state}) if state else "",
        "chart": duration_chart(queries.recent_durations(job)),
        "admin_url": admin_url("admin:scheduler_job_change", job.pk),
    }
    return render(request, "dashboard/job.html", context)


@staff_required
def execution_detail(request, pk):
    execution = get_object_or_404(Execution.objects.select_related("job", "runner"), pk=pk)
    chunks = queries.log_chunks(execution)
    context = {
        "execution": execution,
        "job": execution.job,
        "attempts": queries.execution_attempts(execution),
        "log": "".join(data for _, data in chunks),
        "last_seq": chunks[-1][0] if chunks else -1,
        "live": execution.state in Execution.ACTIVE_STATES,
    }
    return render(request, "dashboard/execution.html", context)


@staff_required
def execution_log(request, pk):
    """Log chunks after `?after=<seq>`, for the execution page's live tail,
    with the metadata that changes while an execution runs."""
    execution = get_object_or_404(Execution.objects.select_related("runner"), pk=pk)
    try:
        after = int(request.GET.get("after", -1))
    except ValueError:
        return JsonResponse({"detail": "after: expected an integer seq"}, status=400)
    chunks = queries.log_chunks(execution, after=after, limit=queries.LOG_CHUNKS_PER_POLL)
    return JsonResponse(
        {
            "state": execution.state,
            "state_label": execution.get_state_display(),
            "live": execution.state in Execution.ACTIVE_STATES,
            "truncated": execution.log_truncated,
            "chunks": [{"seq": seq, "data": data} for seq, data in chunks],
            # More chunks are waiting when this answer was cut at the limit.
            "more": len(chunks) == queries.LOG_CHUNKS_PER_POLL,
            "fields": live_fields(execution),
        }
    )


def live_fields(execution):
    """HTML of the execution page's fields that change while it runs."""
    return {
        "runner": escape(execution.runner.name) if execution.runner else "—",
        "claimed_at": tags.when(execution.claimed_at),
        "finished_at": tags.when(execution.finished_at),
        "duration": tags.seconds(execution.duration),
        "exit_code": "—" if execution.exit_code is None else str(execution.exit_code),
        "log_size": filesizeformat(execution.log_size),
    }


@staff_required
def runners(request):
    return render(request, "dashboard/runners.html", {"runners": queries.runners_with_work()})


@staff_required
def audit(request):
    filters = {key: request.GET.get(key, "").strip() for key in ("action", "actor", "target")}
    page = queries.audit_events(**filters, number=queries.page_number(request.GET.get("page")))
    query = urlencode({key: value for key, value in filters.items() if value})
    return render(
        request, "dashboard/audit.html", {"filters": filters, "page": page, "query": query}
    )
