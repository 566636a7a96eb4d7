"""The rules that keep a job consistent, as `Job.clean` and apply check them:
its overlap policy, its chains, its schedule on its clock and calendar.
Each returns {field: message} or raises ValidationError as `clean` does."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from calendars.periods import RANGE_PROBLEM, out_of_range
from calendars.validators import validate_stored_text, validate_timezone
from scheduler.jobs import chain_graph, requires, webhooks
from scheduler.jobs.cron import ScheduleError, never_fires_reason, next_fire_of, parse_schedule
from scheduler.jobs.schedules.union import TINY

# The job (scheduler.jobs.models.Job): its fields are untyped Django fields.
Job = Any


def overlap_problems(job: Job) -> dict[str, str]:
    """{field: message} for an overlap policy that cannot hold."""
    problems = {}
    if job.singleton and job.overlap not in (job.ALLOW, job.SKIP):
        problems["overlap"] = f"{job.overlap} cannot be combined with singleton: true"
    if job.overlap != job.QUEUE:
        for name in ("max_concurrent", "max_queue"):
            if getattr(job, name) is not None:
                problems[name] = "only with overlap: queue"
    if job.max_concurrent is not None and job.max_concurrent < 1:
        problems["max_concurrent"] = "must be at least 1"
    if job.run_on == job.ALL and (job.singleton or job.overlap != job.ALLOW):
        # One live run per job cannot be one run per runner.
        policy = "singleton: true" if job.singleton else f"overlap: {job.overlap}"
        problems["run_on"] = f"all cannot be combined with {policy} (one run per runner)"
    if job.stagger is not None and job.run_on != job.ALL:
        problems["stagger"] = "only with run_on: all"
    return problems


def chain_problems(
    job: Job, graph: dict[str, tuple[list[str], list[str]]] | None = None
) -> dict[str, str]:
    """{field: message} for `on_success` / `on_failure` naming a missing
    job or closing a cycle; `graph`: the other jobs' chains (default:
    as stored, read under the chain graph's lock: call it inside the
    transaction that saves the job). Skipped while `defer_chain_check`
    is set: apply checks a whole file's chains at once, after its jobs."""
    if getattr(job, "defer_chain_check", False):
        return {}
    if requires.shape_problem(job.requires):
        return {}  # the field's validator names it
    if graph is None:
        if job.on_success or job.on_failure or job.requires:  # no edges, no cycle closed
            chain_graph.lock()
        jobs = type(job).objects
        others = jobs.exclude(pk=job.pk) if job.pk else jobs.all()
        graph = chain_graph.graph_of(others.values_list("name", *chain_graph.GRAPH_FIELDS))
    found: dict[str, str] = chain_graph.problems(
        job.name,
        job.on_success or [],
        job.on_failure or [],
        graph,
        requires.names(job.requires),
    )
    return found


def by_field(problems: dict[str, str]) -> dict[str, str]:
    """Problems named by a path inside a field ("requires[1].job") under the
    field, the path leading the message: a form shows errors by field."""
    found = {}
    for path, message in problems.items():
        field = path.split("[", 1)[0]
        found[field] = message if field == path else f"{path}: {message}"
    return found


def webhook_problems(job: Job) -> dict[str, str]:
    """{field: message} for a webhook secret that is no reference a
    webhook call could read (scheduler.jobs.webhooks.secret_problem)."""
    if not job.webhook_secret:
        return {}
    problem = webhooks.secret_problem(job.webhook_secret)
    return {"webhook_secret": problem} if problem else {}


# What only a shell job has: an http job starts no process, a container
# job's engine runs its image (docs/design.md §15).
SHELL_ONLY = ("command", "stdin", "run_as", "env", "parameters")
# Why a job of another kind has none of them.
NO_SHELL = {
    "http": "only with kind: shell (an http job starts no process)",
    "container": "only with kind: shell (a container job runs its image: see container)",
}
# The limits a job of another kind cannot have, and why (docs/design.md
# §15): an http job starts no process, so it has no memory or CPU of its own
# to limit, and no exit code; a container job's memory and CPU are its
# engine's to limit (held on the engine's command they would hold nothing of
# the container), while its output and exit code are the run's as a shell
# job's are.
UNLIMITED = {
    "http": {
        "max_memory": NO_SHELL["http"],
        "max_cpu_seconds": NO_SHELL["http"],
        "success_exit_codes": "only with kind: shell (an http job succeeds on http.expect_status)",
    },
    "container": {
        "max_memory": "only with kind: shell (a container job's memory is its engine's to limit)",
        "max_cpu_seconds": "only with kind: shell (a container job's CPU is its engine's to limit)",
    },
}
# The field each kind's own work lives in, and what it must hold.
KIND_FIELDS = {
    "http": ("http", "url", "a mapping with the request's url"),
    "container": ("container", "image", "a mapping with the image to run"),
}


def kind_problems(job: Job) -> dict[str, str]:
    """{field: message} for what the job's kind cannot have or lacks: a
    shell job runs its command, an http job makes its request and a
    container job has its image run; neither of those runs a command (the
    shape of a request or a container is apply's check:
    `scheduler.apply.items.http_request`, `container_spec`)."""
    if job.kind not in (job.SHELL, *KIND_FIELDS):
        return {}  # the field's choices name it
    problems = {}
    for kind, (field, _, _) in KIND_FIELDS.items():
        if kind != job.kind and getattr(job, field):
            problems[field] = f"only with kind: {kind}"
    if job.kind == job.SHELL:
        if not job.command:
            problems["command"] = "required: the shell command the runner runs (sh -c)"
        return problems
    problems.update((name, NO_SHELL[job.kind]) for name in SHELL_ONLY if getattr(job, name))
    limits = UNLIMITED[job.kind]
    problems.update((name, why) for name, why in limits.items() if getattr(job, name))
    field, key, shape = KIND_FIELDS[job.kind]
    # A value its own check refused is named there (the admin form).
    refused = getattr(job, f"{field}_refused", False)
    value = getattr(job, field)
    if not refused and not (isinstance(value, dict) and value.get(key)):
        problems[field] = f"required with kind: {job.kind}: {shape}"
    return problems


def clean(job: Job) -> None:
    """`Job.clean`: ValidationError naming the fields that cannot hold."""
    # Text first: the checks below look names up and parse the schedule.
    validate_stored_text(job)
    problems = {
        **kind_problems(job),
        **job.overlap_problems(),
        **by_field(job.chain_problems()),
        **webhook_problems(job),
    }
    if problems:
        raise ValidationError(problems)
    job.sync_overlap()
    job.sync_run_limit()
    bounds = {
        name: RANGE_PROBLEM
        for name in ("not_before", "not_after")
        if getattr(job, name) is not None and out_of_range(getattr(job, name))
    }
    if bounds:
        raise ValidationError(bounds)
    job.sync_webhook()
    if not (job.schedule or job.schedules or job.at):
        if not (job.run_on_register or job.webhook):
            raise ValidationError(
                {
                    "schedule": "required, unless the job has schedules or one-shot "
                    "instants (at), runs on register (run_on_register: true) or has a "
                    "webhook (webhook: true)"
                }
            )
        return  # nothing to parse: it runs when a runner starts, or when called or triggered
    try:
        validate_timezone(job.timezone)
    except ValidationError:
        return  # the field validator reports it
    problems = source_problems(job)
    if not problems:
        problems = bound_problems(job)
    if problems:
        raise ValidationError(problems)


def source_problems(job: Job, rules: Any = None) -> dict[str, list[str]]:
    """{field: messages} for a schedule that cannot be read or never meets
    the job's calendar (`rules`, default the job's own); an item of
    `schedules` is named by its index ("[1]: ...", which apply writes
    `jobs[0].schedules[1]: ...`)."""
    if rules is None:
        rules = job.calendar_rules()
    problems: dict[str, list[str]] = {}
    for field, where, text, tz in sources(job):
        problem = schedule_problem(job, text, tz, rules)
        if problem:
            problems.setdefault(field, []).append(where + problem)
    return problems


def sources(job: Job) -> list[tuple[str, str, Any, Any]]:
    """[(field, index prefix, schedule text, timezone)] of the job's
    schedules: `schedule`, then each item of `schedules`."""
    found = [("schedule", "", job.schedule, job.timezone)] if job.schedule else []
    listed = job.schedules if isinstance(job.schedules, list) else []  # else its validator's
    for index, item in enumerate(listed):
        text, tz = (
            (item.get("cron"), item.get("timezone")) if isinstance(item, dict) else (item, "")
        )
        found.append(("schedules", f"[{index}]: ", text, tz or job.timezone))
    return found


def schedule_problem(job: Job, text: Any, tz: Any, rules: Any) -> str | None:
    """Why one schedule of the job cannot be, or None."""
    if not isinstance(tz, str):
        return f"timezone: {tz!r} is not a timezone name"
    try:
        parse_schedule(text, key=job.name)
        validate_timezone(tz)
    except ScheduleError as e:
        return str(e)
    except ValidationError as e:
        return f"timezone: {' '.join(e.messages)}"
    reason: str | None = never_fires_reason(
        text,
        tz,
        rules,
        timezone.now(),
        horizon_years=settings.CRONIQ_HORIZON_YEARS,
        policy=job.calendar_policy,
        key=job.name,
    )
    return reason


def bound_problems(job: Job) -> dict[str, str]:
    """{field: message} for bounds that leave no occurrence between them.
    Only what does not change as time passes: a document applied again
    once its instants or bounds are past stays valid."""
    first, last = job.not_before, job.not_after
    if first is None or last is None:
        return {}
    if last <= first:
        return {"not_after": "must be after not_before"}
    try:
        rules = job.calendar_rules()
        instant = next_fire_of(
            job.timing.shifted(job.offset),  # bounds make a Timing
            rules,
            first - job.offset - TINY,
            job.calendar_policy,
            horizon_years=settings.CRONIQ_HORIZON_YEARS,
            key=job.name,
        )
    except ValueError:  # ScheduleError, RulesError: reported on their own fields
        return {}
    if instant is None:
        return {
            "not_after": "no occurrence of the job's schedules and instants falls between "
            "not_before and not_after"
        }
    return {}
