"""What a notification says: one line an operator understands at 03:00, and
the docs/design.md §9 body around it.

The body is fixed when the event is routed, so every retry of a delivery
sends the same bytes. Times read in settings.TIME_ZONE, the dashboard's.
"""

import datetime as dt
import zoneinfo
from typing import Any

from django.conf import settings
from django.urls import reverse

from notifications.models import Event


def message(
    notification_id: Any, event: Event, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The §9 body of the notification `notification_id` telling `event`:
    {"id", "event", "at", "summary", "job"?, "execution"?, "runner"?, "check"?, "url"}.
    `extra` adds fields, such as "details" (a list of lines: what a throttle
    suppressed, the members of a group)."""
    data = event.data
    fields = {key: data[key] for key in ("job", "execution", "runner", "check") if data.get(key)}
    return body(
        notification_id,
        event.name,
        event.at,
        summary(event),
        page_of(event),
        **fields,
        **(extra or {}),
    )


def body(
    notification_id: Any, name: str, at: dt.datetime, summary_line: str, path: str, **fields: Any
) -> dict[str, Any]:
    """A §9 body; `fields` are the optional parts ("job", "details"...)."""
    return {
        "id": str(notification_id),
        "event": name,
        "at": at.isoformat(),
        "summary": summary_line,
        **fields,
        "url": url(path),
    }


def url(path: str) -> str:
    return settings.CRONIQ_PUBLIC_URL + path


def page_of(event: Event) -> str:
    """The dashboard page that shows what the event is about."""
    data = event.data
    if data.get("execution"):
        return reverse("dashboard:execution", args=[data["execution"]["id"]])
    if data.get("job"):
        return reverse("dashboard:job", args=[data["job"]["name"]])
    if data.get("runner") or event.name == "labels.unserved":
        return reverse("dashboard:runners")
    return reverse("dashboard:overview")


def summary(event: Event) -> str:
    """One line saying what happened, in an operator's words."""
    describe = SUMMARIES.get(event.name)
    if describe is None:
        return f"{event.name}: {subject_name(event)}"
    return describe(event, event.data)


def subject_name(event: Event) -> str:
    data = event.data
    for key in ("job", "runner", "check"):
        if data.get(key):
            return data[key]["name"]
    return "Croniq"


def job_name(event: Event) -> str:
    return (event.data.get("job") or {}).get("name", "a deleted job")


def check_name(event: Event) -> str:
    return (event.data.get("check") or {}).get("name", "")


def runner_name(event: Event) -> str | None:
    """The runner an event is about, or that ran its execution (None if unknown)."""
    if event.data.get("runner"):
        return event.data["runner"]["name"]
    execution = event.execution
    if execution is not None and execution.runner is not None:
        return execution.runner.name
    return None


def attempt_of(event: Event) -> str:
    """ "attempt 2 of 3" (of 3 only when the job's retries say so)."""
    attempt = (event.data.get("execution") or {}).get("attempt")
    if attempt is None:
        return ""
    job = event.job
    if job is not None and event.name != "execution.lost" and attempt <= job.retries + 1:
        return f"attempt {attempt} of {job.retries + 1}"
    return f"attempt {attempt}"


def on_runner(event: Event) -> str:
    runner = runner_name(event)
    return f" on {runner}" if runner else ""


def with_attempt(text: str, event: Event) -> str:
    attempt = attempt_of(event)
    return f"{text}, {attempt}" if attempt else text


def exit_of(event: Event) -> str:
    code = (event.data.get("execution") or {}).get("exit_code")
    return f" (exit {code})" if code is not None else ""


def execution_failed(event: Event, data: dict[str, Any]) -> str:
    return with_attempt(f"{job_name(event)} failed{exit_of(event)}{on_runner(event)}", event)


def execution_timed_out(event: Event, data: dict[str, Any]) -> str:
    took = (data.get("execution") or {}).get("duration")
    after = f" after {duration(took)}" if took is not None else ""
    return with_attempt(f"{job_name(event)} timed out{after}{on_runner(event)}", event)


def execution_lost(event: Event, data: dict[str, Any]) -> str:
    lost = f"{job_name(event)} was lost{on_runner(event)} (its runner stopped answering)"
    return with_attempt(lost, event)


GIVEN_UP = {"timed_out": "timed out for good", "lost": "was lost for good"}


def execution_given_up(event: Event, data: dict[str, Any]) -> str:
    attempts = data.get("attempts") or (data.get("execution") or {}).get("attempt")
    tries = f" after {plural(attempts, 'attempt')}" if attempts else ""
    how = GIVEN_UP.get((data.get("execution") or {}).get("state"), "failed for good")
    return f"{job_name(event)} {how}{tries}{exit_of(event)}{on_runner(event)}"


UNMET_OUTCOMES = {
    "waiting": "waits",
    "skipped": "was skipped",
    "failed": "failed",
}


def execution_requirements_unmet(event: Event, data: dict[str, Any]) -> str:
    """'report waits: import has not succeeded since 07:30' (skipped,
    failed; waits until 09:30)."""
    due = (data.get("execution") or {}).get("scheduled_for")
    run = f"{job_name(event)}'s {clock(parse(due))} run" if due else job_name(event)
    how = UNMET_OUTCOMES.get(data.get("outcome"), "did not run")
    lacking = ", ".join(
        f"{need.get('job')} has not succeeded since {clock(parse(need['since']))}"
        if need.get("since")
        else f"{need.get('job')} has not succeeded"
        for need in data.get("unmet") or []
    )
    text = f"{run} {how}: {lacking or 'its requirements are unmet'}"
    until = data.get("waiting_until")
    return f"{text} (it waits until {clock(parse(until))})" if until else text


def job_failing(event: Event, data: dict[str, Any]) -> str:
    streak = data.get("streak", 1)
    since = data.get("failing_since")
    since_text = f" since {clock(parse(since))}" if since else ""
    return f"{job_name(event)} has failed {plural(streak, 'run')} in a row{since_text}"


def job_recovered(event: Event, data: dict[str, Any]) -> str:
    return f"{job_name(event)} recovered after {plural(data.get('streak', 1), 'failed run')}"


def job_missed(event: Event, data: dict[str, Any]) -> str:
    due = data.get("scheduled_for")
    run = f"its {clock(parse(due))} run" if due else "a run"
    grace = data.get("grace")
    late = f": not started {duration(grace)} after" if grace is not None else ""
    reason = f" ({data['reason']})" if data.get("reason") else ""
    return f"{job_name(event)} missed {run}{late}{reason}"


def job_slow(event: Event, data: dict[str, Any]) -> str:
    """`elapsed` (the detectors') or `duration`; the baseline is the job's p95."""
    running = data.get("elapsed", data.get("duration"))
    text = f"{job_name(event)} is slow"
    if running is not None:
        text = f"{job_name(event)} has been running for {duration(running)}"
    if data.get("max_duration") is not None and data.get("factor") is None:
        return f"{text}, past its maximum of {duration(data['max_duration'])}"
    usual = data.get("p95", data.get("baseline"))
    if usual is not None:
        factor = data.get("factor")
        times = f"{factor:g}x " if factor is not None else ""
        return f"{text}, over {times}its usual {duration(usual)}"
    return text


def job_fast(event: Event, data: dict[str, Any]) -> str:
    took = duration(data.get("duration", 0))
    minimum = data.get("min_duration")
    under = f", under its minimum of {duration(minimum)}" if minimum is not None else ""
    return f"{job_name(event)} finished in {took}{under}"


def job_paused(event: Event, data: dict[str, Any]) -> str:
    reason = data.get("reason")
    return f"{job_name(event)} was paused" + (f": {reason}" if reason else "")


def runner_offline(event: Event, data: dict[str, Any]) -> str:
    seen = data.get("last_seen_at")
    last = f" (last seen {clock(parse(seen), seconds=True)})" if seen else ""
    return f"runner {subject_name(event)} is offline{last}"


def runner_flapping(event: Event, data: dict[str, Any]) -> str:
    takeovers, window = data.get("takeovers"), data.get("window")
    if takeovers is None or window is None:
        return f"runner {subject_name(event)} is flapping"
    return (
        f"runner {subject_name(event)} is flapping: taken over {plural(takeovers, 'time')}"
        f" in {duration(window)}"
    )


def labels_unserved(event: Event, data: dict[str, Any]) -> str:
    labels = ",".join(data.get("labels") or []) or "(none)"
    count = data.get("pending", data.get("count"))
    waiting = f"{plural(count, 'execution')} wait" if count else "executions wait"
    return f"{waiting} for labels {labels}: no online runner carries them"


def scheduler_stalled(event: Event, data: dict[str, Any]) -> str:
    quiet = data.get("stalled_for")
    if quiet is None and data.get("last_tick"):
        quiet = (event.at - parse(data["last_tick"])).total_seconds()
    if quiet is None:
        return "the scheduler has stopped ticking"
    return f"the scheduler has not ticked for {duration(quiet)}"


def check_down(event: Event, data: dict[str, Any]) -> str:
    reason = data.get("reason")
    return f"check {check_name(event)} is down" + (f": {reason}" if reason else "")


def check_up(event: Event, data: dict[str, Any]) -> str:
    return f"check {check_name(event)} is up again"


SUMMARIES = {
    "execution.failed": execution_failed,
    "execution.timed_out": execution_timed_out,
    "execution.lost": execution_lost,
    "execution.given_up": execution_given_up,
    "execution.requirements_unmet": execution_requirements_unmet,
    "job.failing": job_failing,
    "job.recovered": job_recovered,
    "job.missed": job_missed,
    "job.slow": job_slow,
    "job.fast": job_fast,
    "job.paused": job_paused,
    "runner.offline": runner_offline,
    "runner.flapping": runner_flapping,
    "labels.unserved": labels_unserved,
    "scheduler.stalled": scheduler_stalled,
    "check.down": check_down,
    "check.up": check_up,
}


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def duration(seconds: float) -> str:
    """2s, 2m10s, 15m, 1h05m, 2d3h: short, exact to the second under an hour."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s" if seconds else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m" if minutes else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h" if hours else f"{days}d"


def zone() -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(settings.TIME_ZONE)


def clock(instant: dt.datetime, seconds: bool = False) -> str:
    """ "02:00 UTC", or "02:04:11 UTC" with `seconds`."""
    local = instant.astimezone(zone())
    return local.strftime("%H:%M:%S %Z" if seconds else "%H:%M %Z")


def parse(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)
