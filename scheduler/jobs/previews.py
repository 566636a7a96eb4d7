"""Fire times of a job as typed into the admin form, before it is saved.

`draft` builds the job the form would save, `preview` lists when it fires:
`Job.upcoming`, the loop's own count, plus the candidates the calendar turned
away on the way (each with its reason) and the months an `@business_day` job
has too few allowed days in (`skipped_months`, which `next_runs` prints too).
A preview never guesses an anchor of its own: the stored job (and so its
`@every` grid) when the form leaves the schedule as it is, else a job
anchored on `now`, as saving it would reschedule it (`Job.reschedule`).
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone as django_timezone

from calendars.models import Calendar
from calendars.zones import RulesError, get_zone, local_midnight
from core.admin_widgets import names_in
from scheduler.jobs.cron import ScheduleError, months_without_occurrence, parse_schedule, uses_key
from scheduler.jobs.fire_times import NO_SCHEDULE, anchored_every
from scheduler.jobs.schedules.union import instants
from scheduler.models import Job

SHOWN = 10
# "Show more": the next 50 fire times, or every fire time of the next three
# months when that is more (a freeze weeks ahead shows up), capped.
MORE_SHOWN = 50
MORE_SPAN = timedelta(days=92)
MORE_CAP = 500


class PreviewError(ValueError):
    """Form input no preview can be computed from, with a message a person understands."""


@dataclass(frozen=True)
class ScheduleForm:
    """What the form says about when the job fires."""

    schedule: str
    timezone: str
    calendar_id: int | None = None
    policy: str = Job.SKIP
    job_id: int | None = None
    name: str = ""  # seeds the schedule's H forms and the jitter
    jitter: int | None = None
    # docs/design.md §14; None: the form does not say (as stored).
    timing: "FormTiming | None" = None


@dataclass(frozen=True)
class FormTiming:
    """What the form says of a job's timing beyond its schedule."""

    schedules: tuple = ()
    at: tuple = ()  # instants, sorted, distinct
    not_before: datetime | None = None
    not_after: datetime | None = None
    max_runs: int | None = None

    @classmethod
    def of(cls, job: Job) -> "FormTiming":
        return cls(
            tuple(freeze(item) for item in job.schedules or []),
            instants(job.at or []),
            job.not_before,
            job.not_after,
            job.max_runs,
        )


def freeze(item: Any) -> Any:
    return tuple(sorted(item.items())) if isinstance(item, dict) else item


def read_form(params: Mapping[str, str]) -> ScheduleForm:
    """A ScheduleForm from the query string's fields; PreviewError when malformed."""
    policy = params.get("calendar_policy") or Job.SKIP
    if policy not in dict(Job.CALENDAR_POLICIES):
        raise PreviewError(f"unknown calendar policy {policy!r} (use skip or defer)")
    return ScheduleForm(
        schedule=params.get("schedule", "").strip(),
        timezone=params.get("timezone", "").strip(),
        calendar_id=optional_id(params.get("calendar"), "calendar"),
        policy=policy,
        job_id=optional_id(params.get("job"), "job"),
        name=params.get("name", "").strip(),
        jitter=optional_id(params.get("jitter"), "jitter"),
        timing=read_timing(params) if "schedules" in params or "at" in params else None,
    )


def read_timing(params: Mapping[str, str]) -> FormTiming:
    """The form's schedules, one-shot instants, bounds and max_runs, as the
    admin's inputs post them (a bound as its date and time inputs)."""
    text = params.get("schedules", "").strip()
    if text.startswith("["):
        try:
            schedules = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            raise PreviewError("schedules: not a JSON list of schedules") from None
        if not isinstance(schedules, list):
            raise PreviewError("schedules: not a JSON list of schedules")
    else:
        schedules = [line.strip() for line in text.splitlines() if line.strip()]
    try:
        at = instants(names_in(params.get("at", "")))
    except ScheduleError as e:
        raise PreviewError(f"at: {e}") from None
    return FormTiming(
        tuple(freeze(item) for item in schedules),
        at,
        bound(params, "not_before"),
        bound(params, "not_after"),
        optional_id(params.get("max_runs"), "max_runs"),
    )


def bound(params: Mapping[str, str], name: str) -> datetime | None:
    """A bound from the admin's date and time inputs (`name_0`, `name_1`),
    on the admin's clock (TIME_ZONE), or from one ISO 8601 text (`name`)."""
    text = params.get(name) or " ".join(
        part for part in (params.get(f"{name}_0", ""), params.get(f"{name}_1", "")) if part
    )
    if not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise PreviewError(f"{name}: {text!r} is not a date and time") from None
    if moment.tzinfo is None:
        moment = django_timezone.make_aware(moment, django_timezone.get_current_timezone())
    return moment.astimezone(UTC)


def optional_id(text: str | None, kind: str) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    if not text.isdigit() or len(text) > 18:
        raise PreviewError(f"{kind} id {text!r} is not a number")
    return int(text)


def load_draft(form: ScheduleForm) -> Job:
    """The job the form would save; PreviewError for an unknown job or calendar."""
    stored = None
    if form.job_id is not None:
        stored = Job.objects.select_related("calendar").filter(pk=form.job_id).first()
        if stored is None:
            raise PreviewError(f"unknown job {form.job_id}")
    calendar = None
    if form.calendar_id is not None:
        calendar = Calendar.objects.filter(pk=form.calendar_id).first()
        if calendar is None:
            raise PreviewError(f"unknown calendar {form.calendar_id}")
    return draft(form, stored, calendar)


def draft(form: ScheduleForm, stored: Job | None, calendar: Calendar | None) -> Job:
    """The stored job when saving the form keeps its schedule (and anchor),
    else an unsaved job with the form's schedule, anchored on the save."""
    name = form.name or (stored.name if stored else "")
    timing = form.timing or (FormTiming.of(stored) if stored else FormTiming())
    check(form, name, timing)
    if stored is not None and keeps_schedule(stored, form):
        return stored
    job = Job(
        name=name,
        schedule=form.schedule,
        timezone=form.timezone,
        calendar=calendar,
        calendar_policy=form.policy,
        jitter=form.jitter,
        # A pause outlives the save: the job fires again where it ends.
        paused_at=stored.paused_at if stored else None,
        paused_until=stored.paused_until if stored else None,
        schedules=[dict(item) if isinstance(item, tuple) else item for item in timing.schedules],
        at=[moment.isoformat() for moment in timing.at],
        not_before=timing.not_before,
        not_after=timing.not_after,
        max_runs=timing.max_runs,
        scheduled_runs=stored.scheduled_runs if stored and timing.max_runs else 0,
    )
    if calendar is not None:
        try:
            job.calendar_rules()
        except RulesError as e:
            raise PreviewError(f"calendar {calendar.name}: {e}") from None
    return job


def check(form: ScheduleForm, name: str, timing: FormTiming) -> None:
    if not form.schedule.strip() and not (timing.schedules or timing.at):
        raise PreviewError(NO_SCHEDULE)  # allowed with run on register
    try:
        if form.schedule.strip():
            parse_schedule(form.schedule, key=name)
        get_zone(form.timezone)
    except (ScheduleError, RulesError) as e:
        raise PreviewError(str(e)) from None
    for index, item in enumerate(timing.schedules):
        text, tz = (
            (dict(item).get("cron"), dict(item).get("timezone"))
            if isinstance(item, tuple)
            else (item, None)
        )
        try:
            parse_schedule(text, key=name)
            get_zone(tz or form.timezone)
        except (ScheduleError, RulesError) as e:
            raise PreviewError(f"schedules[{index}]: {e}") from None


def keeps_schedule(stored: Job | None, form: ScheduleForm) -> bool:
    """Whether saving the form leaves next_run_at alone (see JobAdmin.save_model;
    a new name moves the H forms, which hash it)."""
    renamed = form.name and form.name != stored.name
    renamed = renamed and (uses_key(form.schedule) or form.jitter)
    if stored.error or renamed:
        return False
    if form.timing is not None and form.timing != FormTiming.of(stored):
        return False
    return (
        stored.schedule,
        stored.timezone,
        stored.calendar_id,
        stored.calendar_policy,
        stored.jitter,
    ) == (form.schedule, form.timezone, form.calendar_id, form.policy, form.jitter)


def preview(job: Job, now: datetime, more: bool = False) -> dict[str, Any]:
    """The job's next fire times after `now`, with the blocked candidates
    between them, as a JSON-ready dict (times on the job's clock, UTC beside)."""
    blocked = []
    try:
        fires = job.upcoming(now, MORE_CAP if more else SHOWN, blocked)
        reason = "" if fires else job.no_fires_reason(now)
    except (ScheduleError, RulesError) as e:
        raise PreviewError(str(e)) from None
    exhausted = len(fires) < (MORE_CAP if more else SHOWN)
    if more:
        fires = fires[: max(MORE_SHOWN, sum(1 for at in fires if at <= now + MORE_SPAN))]
    if fires and not exhausted:
        blocked = [at for at in blocked if at < fires[-1]]
    entries = [fire_entry(job, at) for at in fires]
    entries += [blocked_entry(job, at) for at in blocked]
    if fires:
        entries += [skipped_entry(job, *month) for month in skipped_months(job, now, fires[-1])]
    entries.sort(key=lambda entry: entry["at"])
    return {
        "timezone": job.timezone,
        "schedule": job.schedule,
        "anchor": anchor_note(job),
        "entries": entries,
        "reason": reason,
        "more": not more and not exhausted,
    }


def fire_entry(job: Job, at: datetime) -> dict[str, Any]:
    wall, utc = job.wall_and_utc(at)
    return {
        "at": iso(at),
        "wall": wall,
        "utc": utc,
        "blocked": False,
        "skipped": False,
        "reason": "",
    }


def blocked_entry(job: Job, at: datetime) -> dict[str, Any]:
    rules = job.calendar_rules()
    why = rules.block_reason(at) or "blocked"
    outcome = "skipped" if job.calendar_policy == Job.SKIP else "deferred to the next allowed time"
    entry = fire_entry(job, at)
    entry.update(blocked=True, reason=f"{why} (calendar {rules.name}): {outcome}")
    return entry


def skipped_entry(job: Job, first_day: datetime, note: str) -> dict[str, Any]:
    """A month an `@business_day` job has no occurrence in, as an entry at its start."""
    at = local_midnight(get_zone(job.timezone), first_day)
    return {
        "at": iso(at),
        "wall": f"{first_day:%B %Y}",
        "utc": None,
        "blocked": True,
        "skipped": True,
        "reason": note,
    }


def skipped_months(job: Job, after: datetime, until: datetime) -> list[tuple[datetime, str]]:
    """[(first day, sentence)] for each month from `after`'s to `until`'s in which
    an `@business_day` job has fewer allowed days than it counts to; [] for
    other schedules."""
    if not job.schedule:
        return []  # `schedule` alone may be `@business_day`
    rules = job.calendar_rules()
    months = months_without_occurrence(
        job.schedule, job.timezone, rules, after, until, key=job.name
    )
    if not months:
        return []
    wanted = abs(parse_schedule(job.schedule).business_day.n)
    where = f"calendar {rules.name!r} allows" if rules is not None else "Monday to Friday gives"
    return [
        (
            first,
            f"no occurrence in {first:%B %Y}: {where} {days} {plural(days, 'day')} "
            f"that month, fewer than {wanted}",
        )
        for first, days in months
    ]


def plural(count: int, word: str) -> str:
    return word if count == 1 else f"{word}s"


def anchor_note(job: Job) -> str:
    """How an `@every` job's instants are counted, in a sentence ("" for cron)."""
    timing = job.timing
    if timing is not None and not timing.alone:
        if not any(source.schedule.every for source in timing.sources):
            return ""
        through = "not_before" if job.not_before else "the Unix epoch"
        return f"beside other schedules: counted on a fixed grid through {through}"
    if anchored_every(job) is None:
        return ""
    if job.pk and job.next_run_at:
        wall, _ = job.wall_and_utc(job.next_run_at)
        return f"counted on the grid of the next run ({wall})"
    return "counted from the moment the job is saved"


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")
