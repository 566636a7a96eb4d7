"""The operator's dashboard: pages over jobs, runs, runners and the audit
trail, and buttons for the operator actions the user holds the permission
for. Views stay thin; the reads are in `dashboard.queries` (and what runs
add up to in `dashboard.run_stats`), the actions in
`scheduler.runs.operations` and `dispatch.identity`.

A user whose roles are per project sees the rows of those projects alone
(`dashboard.seen`): another project's job or run is 404, and a button
shows, and its POST acts, only where the role on that row allows."""

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.html import escape
from django.views.decorators.http import require_POST, require_safe

from calendars.validators import text_problem
from core import permissions
from dashboard import bulk, job_filters, palette_entries, queries, run_stats, schedules, seen
from dashboard.charts import capacity_chart, duration_chart, failure_heatmap
from dashboard.job_filters import FilterError, JobFilter
from dashboard.templatetags import dashboard_tags as tags
from dispatch import capacity as capacity_forecast
from dispatch import identity, liveness
from notifications.models import Notification
from projects import scoping
from runners.models import Runner
from scheduler import forecast as forecast_core
from scheduler.firing import fanout
from scheduler.models import Execution, Job
from scheduler.runs import groups, operations, requirements

View = Callable[..., HttpResponse]


def staff_page(*needed: str) -> Callable[[View], View]:
    """A page for staff holding the `needed` permissions, the view
    permissions of what it shows (as in the admin), globally or by a role
    in some project (`seen.opens`); others get 403. Pages only read: other
    methods than GET/HEAD get 405. The page keeps what it needs
    (`needed_permissions`): the palette offers it only to whom it opens."""

    def decorate(view):
        @wraps(view)
        def checked(request, *args, **kwargs):
            if not seen.opens(request.user, needed):
                raise PermissionDenied(f"This page needs the permissions {', '.join(needed)}.")
            return view(request, *args, **kwargs)

        page = staff_only(require_safe(checked))
        page.needed_permissions = needed
        return page

    return decorate


def staff_action(action: str) -> Callable[[View], View]:
    """A button's POST: staff only, and a 403 unless the user holds the
    permission `action` needs (core.permissions) globally or in some
    project, checked before anything is looked up or changed. The view then
    finds the row among those the user sees (404 otherwise) and asks again
    for that row (`permissions.require(user, action, row)`)."""

    def decorate(view):
        @wraps(view)
        def checked(request, *args, **kwargs):
            needed = permissions.ACTIONS[action]
            if not scoping.may(request.user, needed):
                raise PermissionDenied(f"{action} needs the permission {needed}")
            return view(request, *args, **kwargs)

        return staff_only(require_POST(checked))

    return decorate


def staff_only(view: View) -> View:
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (request.user.is_active and request.user.is_staff):
            raise PermissionDenied("The dashboard is for staff users.")
        return view(request, *args, **kwargs)

    return wrapper


def admin_url(name: str, *args: Any) -> str | None:
    """The admin page for an object, or None while its model is not registered."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def unsearchable(filters: dict[str, str]) -> HttpResponseBadRequest | None:
    """A 400 naming the first filter whose text no database can search for
    (PostgreSQL refuses a NUL even in a query), or None."""
    for key, value in filters.items():
        if text_problem(value):
            return HttpResponseBadRequest(
                f"{key}: {text_problem(value)}", content_type="text/plain; charset=utf-8"
            )
    return None


@staff_page("scheduler.view_job")
def overview(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    try:
        job_filter = JobFilter.read(request.GET)
    except FilterError as e:
        return HttpResponseBadRequest(str(e), content_type="text/plain; charset=utf-8")
    user = request.user
    projects = seen.project_set(user)
    matching = job_filter.jobs(now, seen.jobs(user))
    number = queries.page_number(request.GET.get("page"))
    page = queries.jobs_page(number, jobs=matching)
    results = queries.recent_results([job.pk for job in page.items])
    pending = queries.pending_work(page.items, now)
    for job in page.items:
        job.recent = results.get(job.pk, [])
        job.schedule_words = schedules.describe(job)
        job.pending = pending.get(job.pk)
    # Offered where the user may act on some job; each job is asked again.
    bulk_actions = [
        (action, verb)
        for action, (permission, verb, _) in bulk.ACTIONS.items()
        if scoping.may(user, permissions.ACTIONS[permission])
    ]
    context = {
        "states": queries.state_counts(projects),
        "every_project": projects is None,
        # The runners are no project's: their counts are for who sees them.
        "runners": queries.runner_counts() if seen.opens(user, ("runners.view_runner",)) else None,
        "job_counts": queries.job_filter_counts(now, seen.jobs(user)),
        "lag": queries.scheduler_lag(now),
        "heatmap": failure_heatmap(
            run_stats.cached_failure_heatmap_rows(now, projects), now, run_stats.HEATMAP_HOURS
        ),
        "page": page,
        "strip_length": queries.STRIP_LENGTH,
        "job_filter": job_filter,
        "job_states": job_filters.STATES,
        "state_label": job_filters.STATES.get(job_filter.state, ""),
        "suggestions": job_filters.suggestions(projects),
        "projects": seen.projects(user),
        # "All N jobs matching the filter": one count over the jobs.
        "matching": matching.count() if bulk_actions else None,
        "bulk_actions": bulk_actions,
        "query": job_filter.query(),
    }
    return render(request, "dashboard/overview.html", context)


@staff_page("scheduler.view_job")
def job_detail(request: HttpRequest, name: str) -> HttpResponse:
    now = timezone.now()
    jobs = seen.jobs(request.user, Job.objects.select_related("calendar", "health"))
    job = get_object_or_404(jobs, name=name)
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
        "chart": duration_chart(run_stats.duration_runs(job), now),
        "run_stats": run_stats.cached_run_stats(job, now),
        "stats_sample": run_stats.STATS_SAMPLE,
        "admin_url": admin_url("admin:scheduler_job_change", job.pk),
        # No row until the job's first run settles.
        "health": getattr(job, "health", None),
        "pending": queries.pending_work([job], now).get(job.pk),
        # Runs held for the job's requirements, with what each still lacks.
        "waiting": requirements.waiting(job),
    }
    return render(request, "dashboard/job.html", context)


@staff_page("scheduler.view_execution")
def execution_detail(request: HttpRequest, pk: int) -> HttpResponse:
    now = timezone.now()
    runs = Execution.objects.select_related("job", "runner", "upstream__job")
    execution = get_object_or_404(seen.executions(request.user, runs), pk=pk)
    chunks = queries.log_chunks(execution)
    context = {
        "execution": execution,
        "job": execution.job,
        "attempts": queries.execution_attempts(execution),
        "log": "".join(data for _, data in chunks),
        "last_seq": chunks[-1][0] if chunks else -1,
        "live": execution.state in Execution.ACTIVE_STATES,
        "retryable": execution.state in operations.RETRYABLE,
        "waiting": queries.why_waiting(execution, now),
        "occurrence": fanout.summary(execution),
        "run_liveness": liveness.run_liveness(execution, now),
    }
    return render(request, "dashboard/execution.html", context)


@staff_page("scheduler.view_execution")
def execution_log(request: HttpRequest, pk: int) -> HttpResponse:
    """Log chunks after `?after=<seq>`, for the execution page's live tail,
    with the metadata that changes while an execution runs and whether its
    runner still speaks (`dispatch.liveness.run_liveness`)."""
    runs = Execution.objects.select_related("runner")
    execution = get_object_or_404(seen.executions(request.user, runs), pk=pk)
    try:
        after = int(request.GET.get("after", -1))
    except ValueError:
        return JsonResponse({"detail": "after: expected an integer seq"}, status=400)
    chunks = queries.log_chunks(execution, after=after, limit=queries.LOG_CHUNKS_PER_POLL)
    run_liveness = liveness.run_liveness(execution, timezone.now())
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
            # A running run whose runner went silent, or whose lease ran
            # out: what the page says of it, or null.
            "liveness": run_liveness.as_json() if run_liveness else None,
        }
    )


def live_fields(execution: Execution) -> dict[str, str]:
    """HTML of the execution page's fields that change while it runs."""
    return {
        "runner": escape(execution.runner.name) if execution.runner else "—",
        "claimed_at": tags.when(execution.claimed_at),
        "finished_at": tags.when(execution.finished_at),
        "duration": tags.seconds(execution.duration),
        "exit_code": "—" if execution.exit_code is None else str(execution.exit_code),
        "log_size": filesizeformat(execution.log_size),
    }


@staff_only
@require_safe
def palette(request: HttpRequest) -> JsonResponse:
    """What the keyboard palette jumps to: the pages, jobs and runners this
    user may read (dashboard.palette_entries), read when it first opens."""
    answer = JsonResponse(palette_entries.entries(request.user))
    answer["Cache-Control"] = "private, no-store"
    return answer


RUNNER_FILTERS = [*dict(Runner.STATES), "flapping"]
# How often the runners page asks for its rows again (dashboard.js).
RUNNERS_POLL_SECONDS = 2


def runner_filter(request: HttpRequest) -> str:
    state = request.GET.get("state", "")
    return state if state in RUNNER_FILTERS else ""


@staff_page("runners.view_runner")
def runners(request: HttpRequest) -> HttpResponse:
    state = runner_filter(request)
    context = {
        "runners": work_seen(request.user, queries.runners_with_work(timezone.now(), state)),
        "state": state,
        "filters": RUNNER_FILTERS,
        "heartbeat": settings.CRONIQ_HEARTBEAT_INTERVAL,
        "silent_after": liveness.silent_after().total_seconds(),
        "offline_after": liveness.offline_after().total_seconds(),
        "poll_seconds": RUNNERS_POLL_SECONDS,
    }
    return render(request, "dashboard/runners.html", context)


@staff_page("runners.view_runner")
def runner_rows(request: HttpRequest) -> HttpResponse:
    """The runners page's rows, as the page renders them, for its script to
    put in place: states, "last seen" and the buttons that apply follow
    the runners without a reload, judged by the server's clock."""
    state = runner_filter(request)
    shown = work_seen(request.user, queries.runners_with_work(timezone.now(), state))
    context = {"runners": shown, "state": state}
    html = render_to_string("dashboard/runner_rows.html", context, request=request)
    return JsonResponse({"html": html})


def work_seen(user: Any, runners: list[Runner]) -> list[Runner]:
    """The runners every project shares, each with the runs of theirs the
    user sees (`current_work`), how many it runs in all (`busy`) and how
    many of those are other projects' (`unseen`), counted, not named."""
    for runner in runners:
        runner.busy = len(runner.current_work)
        runner.current_work = seen.runs(user, runner.current_work)
        runner.unseen = runner.busy - len(runner.current_work)
    return runners


@staff_page("scheduler.view_job", "runners.view_runner")
def capacity(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    result = capacity_forecast.cached_forecast(now)
    # The load is every project's (they share the runners); the names shown
    # are those of the jobs and groups the user sees.
    context = {
        "forecast": result,
        "skipped": skipped_seen(request.user, result.skipped),
        "now": now,
        "charts": [
            capacity_chart(label_set, result.starts, result.bucket)
            for label_set in result.label_sets
        ],
        "spans": result.spans,
        "waits": result.waits,
        "groups": groups_seen(request.user, groups.usage(now)),
        "history_runs": forecast_core.HISTORY_RUNS,
        "default_seconds": forecast_core.DEFAULT_SECONDS,
    }
    return render(request, "dashboard/capacity.html", context)


def skipped_seen(user: Any, skipped: dict[str, str]) -> dict[str, str]:
    """The forecast's left-out jobs {name: why} that `user` sees."""
    if seen.everything(user) or not skipped:
        return skipped
    names = set(seen.jobs(user).filter(name__in=list(skipped)).values_list("name", flat=True))
    return {name: why for name, why in skipped.items() if name in names}


def groups_seen(user: Any, usage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    names = seen.group_names(user)
    return usage if names is None else [row for row in usage if row["name"] in names]


@staff_page("audit.view_auditevent")
def audit(request: HttpRequest) -> HttpResponse:
    filters = {key: request.GET.get(key, "").strip() for key in ("action", "actor", "target")}
    if refused := unsearchable(filters):
        return refused
    page = queries.audit_events(**filters, number=queries.page_number(request.GET.get("page")))
    query = urlencode({key: value for key, value in filters.items() if value})
    return render(
        request, "dashboard/audit.html", {"filters": filters, "page": page, "query": query}
    )


@staff_page("notifications.view_notification")
def alerts(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    state = request.GET.get("state", "")
    if state not in dict(Notification.STATES):
        state = ""
    context = {
        "counts": queries.notification_counts(now),
        "failing": queries.failing_jobs(),
        "mutes": queries.active_mutes(now),
        "page": queries.notifications_page(queries.page_number(request.GET.get("page")), state),
        "state": state,
        "states": Notification.STATES,
        "query": urlencode({"state": state}) if state else "",
    }
    return render(request, "dashboard/alerts.html", context)


def acted_on_job(request: HttpRequest, name: str, action: str) -> Job:
    """The job `name` among those the user sees (404 otherwise), if the
    user may do `action` to it (403 otherwise)."""
    job = get_object_or_404(seen.jobs(request.user), name=name)
    permissions.require(request.user, action, job)
    return job


def acted_on_execution(request: HttpRequest, pk: int, action: str) -> Execution:
    runs = Execution.objects.select_related("job")
    execution = get_object_or_404(seen.executions(request.user, runs), pk=pk)
    permissions.require(request.user, action, execution)
    return execution


@staff_action("job.run")
def run_job(request: HttpRequest, name: str) -> HttpResponse:
    job = acted_on_job(request, name, "job.run")
    try:
        execution = operations.run_now(job, timezone.now(), request.user)
        messages.success(request, f"Run {execution.pk} of {job.name} started.")
    except operations.OperationRefused as e:
        messages.warning(request, str(e))
    return redirect("dashboard:job", job.name)


PAUSE_REASON_LENGTH = Job._meta.get_field("pause_reason").max_length


def pause_reason_problem(reason: str) -> str:
    """Why `reason` cannot be a pause's reason (it is required), or ""."""
    if not reason or len(reason) > PAUSE_REASON_LENGTH:
        return f"give a reason of 1 to {PAUSE_REASON_LENGTH} characters"
    if text_problem(reason):
        return f"the reason {text_problem(reason)}"
    return ""


@staff_action("job.pause")
def pause_job(request: HttpRequest, name: str) -> HttpResponse:
    job = acted_on_job(request, name, "job.pause")
    reason = request.POST.get("reason", "").strip()
    if problem := pause_reason_problem(reason):
        messages.error(request, f"{job.name} not paused: {problem}.")
    elif operations.pause(Job.objects.filter(pk=job.pk), timezone.now(), request.user, reason):
        messages.success(request, f"{job.name} paused: {reason}")
    else:
        messages.info(request, f"{job.name} was paused already.")
    return redirect("dashboard:job", job.name)


@staff_action("job.resume")
def resume_job(request: HttpRequest, name: str) -> HttpResponse:
    job = acted_on_job(request, name, "job.resume")
    if operations.resume(Job.objects.filter(pk=job.pk), timezone.now(), request.user):
        messages.success(request, f"{job.name} resumed.")
    else:
        messages.info(request, f"{job.name} was not paused.")
    return redirect("dashboard:job", job.name)


@staff_action("execution.cancel")
def cancel_execution(request: HttpRequest, pk: int) -> HttpResponse:
    execution = acted_on_execution(request, pk, "execution.cancel")
    if operations.cancel(Execution.objects.filter(pk=pk), timezone.now(), request.user):
        messages.success(request, f"Run {pk} cancelled or asked to stop.")
    else:
        messages.info(request, f"Run {pk} has finished already: nothing to cancel.")
    return redirect("dashboard:execution", execution.pk)


@staff_action("execution.retry")
def retry_execution(request: HttpRequest, pk: int) -> HttpResponse:
    execution = acted_on_execution(request, pk, "execution.retry")
    try:
        new = operations.retry(execution, timezone.now(), request.user)
    except operations.OperationRefused as e:
        messages.warning(request, str(e))
        return redirect("dashboard:execution", execution.pk)
    messages.success(request, f"Run {pk} retried as run {new.pk}.")
    return redirect("dashboard:execution", new.pk)


@staff_action("runner.drain")
def drain_runner(request: HttpRequest, pk: int) -> HttpResponse:
    runner = get_object_or_404(Runner, pk=pk)
    if runner.state == Runner.OFFLINE and not runner.is_drained:
        # Not offered for it (`Runner.drainable`); a page older than the
        # runner's last state posted it.
        messages.warning(request, f"{runner.name} is offline: it takes no work to drain.")
    elif identity.drain(runner, timezone.now(), actor=request.user):
        messages.success(request, f"{runner.name} is draining.")
    else:
        messages.info(request, f"{runner.name} was draining already.")
    return redirect("dashboard:runners")


@staff_action("runner.resume")
def resume_runner(request: HttpRequest, pk: int) -> HttpResponse:
    runner = get_object_or_404(Runner, pk=pk)
    if identity.resume(runner, timezone.now(), actor=request.user):
        messages.success(request, f"{runner.name} takes new work again.")
    else:
        messages.info(request, f"{runner.name} was not draining.")
    return redirect("dashboard:runners")


@staff_action("runner.forget")
def forget_runner(request: HttpRequest, pk: int) -> HttpResponse:
    runner = get_object_or_404(Runner, pk=pk)
    released = identity.forget(runner, timezone.now(), actor=request.user)
    messages.success(request, f"{runner.name} forgotten, {len(released)} run(s) released.")
    return redirect("dashboard:runners")
