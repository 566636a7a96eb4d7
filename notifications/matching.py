"""Does a rule want an event? (issue 16, item 3)

Every filter a rule sets must hold; an empty filter lets everything through.
The event's subjects are read from the snapshots in `event.data` (the job as
it was when the event happened), except the job's calendar, which only the
job row knows.

Thresholds are part of matching, so each event is routed once:

- `job.failing` carries the streak it was emitted at and matches a rule only
  when the streak equals the rule's `failures_in_a_row`: one alert per
  streak, when it reaches the rule's threshold (not again at every failure
  after it; `job.recovered` says when it ends).
- `job.slow` carries the `factor` it was detected at and matches the rules
  whose `slow_factor` (or, unset, CRONIQ_SLOW_FACTOR) is that factor. A
  job.slow without a factor (past the job's own `max_duration`) matches
  every rule.
- `job.missed`, `labels.unserved` and `scheduler.stalled` carry the `grace`
  they were detected after and match the rules whose `grace` (or, unset, the
  setting's default) is that grace. Without a grace, every rule.
"""

import fnmatch
import math
from typing import Any

from django.conf import settings
from django.db.models import Prefetch

from notifications.models import Channel, Event, Rule

GRACE_SETTINGS = {
    "job.missed": "CRONIQ_MISSED_GRACE",
    "labels.unserved": "CRONIQ_UNSERVED_GRACE",
    "scheduler.stalled": "CRONIQ_STALL_GRACE",
}


def matches(rule: Rule, event: Event) -> bool:
    """True when every filter and threshold of `rule` holds for `event`.
    Whether the rule is enabled (and fallback rules) is the router's call."""
    return (
        event.name in rule.events
        and job_name_matches(rule, event)
        and check_name_matches(rule, event)
        and labels_match(rule, event)
        and calendar_matches(rule, event)
        and owner_matches(rule, event)
        and threshold_reached(rule, event)
    )


def job_of(event: Event) -> dict[str, Any] | None:
    """The job snapshot {"name", "owner", "labels"}, or None."""
    return event.data.get("job") or None


def job_name_matches(rule: Rule, event: Event) -> bool:
    if not rule.jobs:
        return True
    job = job_of(event)
    return job is not None and fnmatch.fnmatchcase(job["name"], rule.jobs)


def check_of(event: Event) -> dict[str, Any] | None:
    """The check snapshot of a check.* event {"name", "project", ...}, or None."""
    return event.data.get("check") or None


def check_name_matches(rule: Rule, event: Event) -> bool:
    """A rule with `checks` routes only check events of the checks it names."""
    if not rule.checks:
        return True
    check = check_of(event)
    return check is not None and fnmatch.fnmatchcase(check["name"], rule.checks)


def subject_labels(event: Event) -> list[str]:
    """The labels a rule's `labels` filter looks at: the job's; for runner
    events the runner's; for labels.unserved the labels nobody serves."""
    if event.name == "labels.unserved" or event.name.startswith(("runner.", "check.")):
        labels = event.data.get("labels")
        if labels is None and event.runner is not None:
            labels = event.runner.labels  # runner.flapping carries none
        return labels or []
    job = job_of(event)
    return job.get("labels", []) if job else []


def labels_match(rule: Rule, event: Event) -> bool:
    return set(rule.labels or []) <= set(subject_labels(event))


def calendar_matches(rule: Rule, event: Event) -> bool:
    if rule.calendar_id is None:
        return True
    return event.job is not None and event.job.calendar_id == rule.calendar_id


def owner_matches(rule: Rule, event: Event) -> bool:
    if not rule.owner:
        return True
    job = job_of(event)
    return job is not None and job.get("owner") == rule.owner


def threshold_reached(rule: Rule, event: Event) -> bool:
    data = event.data
    if event.name == "job.failing":
        return data.get("streak") == rule.failures_in_a_row
    if event.name == "job.slow":
        factor = data.get("factor")
        wanted = rule.slow_factor if rule.slow_factor is not None else settings.CRONIQ_SLOW_FACTOR
        return factor is None or math.isclose(factor, wanted)
    if event.name in GRACE_SETTINGS:
        grace = data.get("grace")
        default = getattr(settings, GRACE_SETTINGS[event.name])
        wanted = rule.grace if rule.grace is not None else default
        return grace is None or math.isclose(grace, wanted)
    return True


def enabled_rules() -> list[Rule]:
    """The enabled rules, each with `live_channels`: its enabled channels."""
    live = Prefetch(
        "channels", queryset=Channel.objects.filter(enabled=True), to_attr="live_channels"
    )
    return list(Rule.objects.filter(enabled=True).prefetch_related(live))


def routes(event: Event, rules: list[Rule]) -> list[tuple[Rule, Channel]]:
    """The (rule, channel) pairs `event` goes to, among `rules` (from
    `enabled_rules`). Fallback rules take the event only when no other rule
    that reaches an enabled channel matched it: disabling a team's channel
    sends its alerts to the fallback instead of nowhere; muting a rule does
    not (a muted rule still matched)."""
    chosen = [rule for rule in rules if not rule.fallback and matches(rule, event)]
    if not any(rule.live_channels for rule in chosen):
        chosen = [rule for rule in rules if rule.fallback and matches(rule, event)]
    return [(rule, channel) for rule in chosen for channel in rule.live_channels]
