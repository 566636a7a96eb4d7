"""Channels and notification rules as code: the `channels:` and `notify:`
sections of an apply file (docs/design.md §9).

`manage.py apply` reads them through `scheduler.apply.document.add_sections`
(registered in `NotificationsConfig.ready`), in the transaction that applies
the file's calendars and jobs: one bad item refuses the whole file. Errors
name the item and field, like the scheduler's ("channels[1].url: ...",
"notify[0].channels: unknown channel 'ops-pager'"); the admin's forms use the
same checks, so a person reads the same sentence in both places.

What apply creates or updates is apply's, of the file (`managed_source`:
its stem or `--source`), as jobs are (core.ownership), and `--prune`
deletes only that file's rows: a channel or rule made in the admin, adopted
there, or of another file stays.

Durations (`throttle`, `grace`, and a job's `max_duration`/`min_duration`)
are whole seconds (`1800`) or texts in `@every`'s grammar (`"30m"`,
`"1h30m"`, `"2d"`).
"""

import copy
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from django.db.models import Q

from audit.changes import MASK, masked_diff
from calendars.models import Calendar
from core.ownership import ManagedBy
from notifications import channel_config, secrets
from notifications.models import Channel, Rule
from scheduler.apply.export import Selection, as_item, by_name, in_project
from scheduler.apply.fields import REQUIRED, Field, defaults, field_names
from scheduler.apply.items import ApplyError, seconds, string_list
from scheduler.apply.upsert import upsert
from scheduler.runs.events import NAMES

CHANNEL_FIELDS = (
    Field("name", "slug", "Unique name; rules route to the channel by it.", REQUIRED),
    Field("kind", " | ".join(channel_config.KINDS), "How it delivers.", REQUIRED),
    Field("to", "list of addresses", "email: the recipients (required).", []),
    Field(
        "url",
        "URL",
        "webhook, slack: where to POST (required); may be a secret reference such as "
        "file:/run/secrets/slack or ${CRONIQ_SECRET_SLACK_URL}. Private, loopback and "
        "link-local addresses are refused unless CRONIQ_NOTIFY_ALLOW_NETS lists them.",
        "",
    ),
    Field(
        "format", " | ".join(channel_config.FORMATS), "slack: the chat's message format.", "slack"
    ),
    Field(
        "secret",
        "secret reference",
        "webhook: signs each body (file:PATH under CRONIQ_SECRETS_DIR or "
        "${CRONIQ_SECRET_NAME}, never the secret itself).",
        "",
    ),
    Field(
        "headers",
        "mapping of text",
        "webhook: extra HTTP headers; values may hold ${CRONIQ_SECRET_NAME} references.",
        {},
    ),
    Field(
        "timeout",
        "seconds",
        f"webhook, slack: a delivery try ends after it, however slowly the receiver "
        f"answers (at most {channel_config.MAX_TIMEOUT:g}).",
        channel_config.DEFAULT_TIMEOUT,
    ),
    Field(
        "username",
        "text",
        "slack (not format teams): the name messages are posted as, at most 80 characters.",
        "",
    ),
    Field("enabled", "true | false", "A disabled channel sends nothing.", True),
)
# What a channel says besides its config (which `channel_config.validate` checks).
CHANNEL_OWN_KEYS = {"name", "kind", "enabled", "project"}
RULE_FIELDS = (
    Field("name", "slug", "Unique name.", REQUIRED),
    Field(
        "events",
        "list of event names",
        "The events it routes (docs/design.md §9), e.g. [execution.given_up, job.failing].",
        REQUIRED,
    ),
    Field("channels", "list of channel names", "Where it sends them.", REQUIRED),
    Field("jobs", "glob", 'Only jobs whose name matches ("billing-*"); empty: any job.', ""),
    Field(
        "checks",
        "glob",
        'Only check events of checks whose name matches ("backup-*"); empty: any check.',
        "",
    ),
    Field("labels", "list of text", "Only jobs (or runners) carrying all of these.", []),
    Field("calendar", "calendar name", "Only jobs on this calendar.", None),
    Field("owner", "text", "Only jobs of this owner.", ""),
    Field("fallback", "true | false", "Routes only events no other rule matched.", False),
    Field(
        "failures_in_a_row",
        "whole number",
        "job.failing: sent when a job's failure streak reaches it.",
        1,
    ),
    Field("slow_factor", "number", "job.slow: times the job's p95 duration (none: 3).", None),
    Field(
        "grace", "duration", "Before job.missed, labels.unserved and scheduler.stalled count.", None
    ),
    Field(
        "throttle",
        "duration",
        "At most one notification per job within it; the rest are summed up in the next.",
        0,
    ),
    Field("digest", "true | false", "One message a day instead of one per event.", False),
    Field("enabled", "true | false", "A disabled rule routes nothing.", True),
)
CHANNEL_KEYS = field_names(CHANNEL_FIELDS)
RULE_KEYS = field_names(RULE_FIELDS)
RULE_DEFAULTS = defaults(RULE_FIELDS)

# -- field checks, shared with the admin's forms -------------------------------


def event_names(where: str, value: Any) -> list[str]:
    """A non-empty list of docs/design.md §9 event names, each once."""
    if not isinstance(value, list) or not value:
        raise ApplyError(f"{where}: required: a list of event names, e.g. [job.failing]")
    for name in value:
        if name not in NAMES:
            raise ApplyError(f"{where}: unknown event {name!r} (known: {', '.join(NAMES)})")
    return list(dict.fromkeys(value))


def count(where: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplyError(f"{where}: a whole number of at least {least}, got {value!r}")
    if value < least:
        raise ApplyError(f"{where}: a whole number of at least {least}, got {value}")
    return value


def factor(where: str, value: Any) -> float | None:
    """A slow factor: how many times the job's usual (p95) duration is slow."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
        raise ApplyError(
            f"{where}: a number of at least 1 (times the job's p95 duration), got {value!r}"
        )
    return float(value)


def boolean(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ApplyError(f"{where}: true or false, got {value!r}")
    return value


def text(where: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApplyError(f"{where}: expected text, got {value!r}")
    return value


def channel_names(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ApplyError(f"{where}: a rule must route to at least one channel")
    return list(dict.fromkeys(string_list(where, value)))


def channel_problems(kind: str, config: dict[str, Any]) -> dict[str, str]:
    """{field: message} of a channel's config, as `channel_config.validate` words
    it without the leading "field: " (the caller says where)."""
    return {
        field: message.removeprefix(f"{field}: ")
        for field, message in channel_config.validate(kind, config).items()
    }


def without_empty(config: dict[str, Any]) -> dict[str, Any]:
    """A channel's config without the settings left empty (a form's blanks)."""
    return {key: value for key, value in config.items() if value not in ("", None, [], {})}


# -- channels -------------------------------------------------------------------


def channel_values(where: str, item: dict[str, Any]) -> dict[str, Any]:
    """The Channel field values of a `channels:` item; ApplyError names each problem."""
    kind = item.get("kind")
    if kind is None:
        raise ApplyError(f"{where}.kind: required: one of {', '.join(channel_config.KINDS)}")
    config = {key: value for key, value in item.items() if key not in CHANNEL_OWN_KEYS}
    errors = [
        f"{where}.{field}: {message}" for field, message in channel_problems(kind, config).items()
    ]
    try:
        enabled = boolean(f"{where}.enabled", item.get("enabled", True))
    except ApplyError as e:
        errors += e.errors
    if errors:
        raise ApplyError(errors)
    return {
        "kind": kind,
        "format": config.get("format", "slack"),
        "to": list(config.get("to", [])),
        "url": config.get("url", ""),
        "secret": config.get("secret") or "",
        "headers": dict(config.get("headers") or {}),
        "timeout": float(config.get("timeout", channel_config.DEFAULT_TIMEOUT)),
        "username": config.get("username") or "",
        "enabled": enabled,
    }


def channel_state(channel: Channel) -> dict[str, Any]:
    """A comparable picture of a channel: what it sends with, and who owns it."""
    return {
        "kind": channel.kind,
        **channel.config(),
        "enabled": channel.enabled,
        "managed_by": channel.managed_by,
        "managed_source": channel.managed_source,
    }


def masked_url(url: str) -> str:
    """A URL as the audit trail and apply's answer may show it. Credentials
    (`user:pass@`) never show. Chat webhook URLs carry their token in the
    path, and others in the query, so a literal URL shows only its scheme
    and host; one written with ${CRONIQ_SECRET_*} references shows as
    written (the secret is elsewhere), but for its credentials."""
    if not isinstance(url, str) or not url or url.startswith(secrets.FILE_PREFIX):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK  # not a URL at all: nothing of it is safe to show
    host = parts.netloc.rpartition("@")[2]
    if "@" in parts.netloc:
        host = f"{MASK}@{host}"
    if secrets.names_in(url) or secrets.store_names_in(url):
        return urlunsplit(parts._replace(netloc=host))
    rest = parts.path not in ("", "/") or parts.query or parts.fragment
    return f"{parts.scheme}://{host}/{MASK}" if rest else f"{parts.scheme}://{host}{parts.path}"


def masked_channel_diff(diff: dict[str, Any]) -> dict[str, Any]:
    """A channel's diff as it may be printed and audited: the secret
    reference, header values and URL paths masked; that they changed still shows."""

    def mask(name, side):
        if side in (None, "", {}):
            return side
        if name == "secret":
            return MASK
        if name == "headers" and isinstance(side, dict):
            return dict.fromkeys(side, MASK)
        if name == "url":
            return masked_url(side)
        return side

    return {name: [mask(name, side) for side in sides] for name, sides in masked_diff(diff).items()}


def channel_item(channel: Channel) -> dict[str, Any]:
    """A channel as a `channels:` item (`croniq-admin export`): its kind's
    settings as stored, so a secret stays the reference it is."""
    values = {**defaults(CHANNEL_FIELDS), "name": channel.name, **channel_state(channel)}
    values["headers"] = dict(sorted(values["headers"].items()))
    if float(values["timeout"]).is_integer():
        values["timeout"] = int(values["timeout"])  # 12, not 12.0
    return as_item(CHANNEL_FIELDS, values)


# -- what apply must know and say about the sections ----------------------------


def writes_notifications(
    document: dict[str, Any], prune: bool, source: str, managed_source: str
) -> bool:
    """Whether applying `document` may write channels or rules: it has a
    `channels:` or `notify:` section, or `prune` would delete channels or
    rules this file made (those `NotifySections.prune` deletes from)."""
    if any(key in document for key in NotifySections.KEYS):
        return True
    if not prune:
        return False
    managed = file_rows(source, managed_source)
    return Channel.objects.filter(managed).exists() or Rule.objects.filter(managed).exists()


def file_rows(source: str, managed_source: str) -> Q:
    """What apply of `managed_source` manages: its channels and rules. Rows
    an apply stamped with the file's path (or "api:<key>", its `source`)
    before files had names are still its own."""
    sources = {managed_source} | ({source} if source else set())
    return Q(managed_by=ManagedBy.APPLY, managed_source__in=sources)


def environment_warnings(document: dict[str, Any]) -> list[str]:
    """A warning for each `${CRONIQ_SECRET_*}` reference of the document's
    channels: apply checked it in its own environment, but the notifier
    reads it from its own, which may lack it. (A `file:` reference is read
    alike by every process of the machine or container.)"""
    warnings = []
    for number, item in enumerate(document.get("channels") or []):
        if not isinstance(item, dict):
            continue
        for where, text in _reference_texts(item):
            for name in dict.fromkeys(secrets.names_in(text)):
                warnings.append(
                    f"channels[{number}].{where}: ${{{name}}} is read by the notifier (the "
                    "scheduler_loop or serve process) from its own environment when it "
                    "delivers; if that process does not have it, deliveries fail "
                    f"(a file under {secrets.secrets_dir()} is read alike by every process)"
                )
    return warnings


def _reference_texts(item):
    """(field, text) of a channel item's settings that may hold references."""
    texts = [("url", item.get("url")), ("secret", item.get("secret"))]
    headers = item.get("headers")
    if isinstance(headers, dict):
        texts += [(f"headers.{name}", value) for name, value in headers.items()]
    return [(where, text) for where, text in texts if isinstance(text, str)]


# -- rules ----------------------------------------------------------------------


RULE_CHECKS = {
    "events": event_names,
    "jobs": text,
    "checks": text,
    "labels": string_list,
    "owner": text,
    "fallback": boolean,
    "failures_in_a_row": lambda where, value: count(where, value, least=1),
    "slow_factor": factor,
    "grace": lambda where, value: None if value is None else seconds(where, value),
    "throttle": seconds,
    "digest": boolean,
    "channels": channel_names,
    "enabled": boolean,
}


def rule_values(where: str, item: dict[str, Any]) -> dict[str, Any]:
    """The Rule field values of a `notify:` item (channels and calendar by
    name); ApplyError names every field that is wrong."""
    item = {**RULE_DEFAULTS, **item}
    values, errors = {}, []
    for key in ("events", "channels"):
        if key not in item:
            errors.append(f"{where}.{key}: required")
    for key, check in RULE_CHECKS.items():
        if key in item:
            try:
                values[key] = check(f"{where}.{key}", item[key])
            except ApplyError as e:
                errors += e.errors
    values["calendar"] = None
    if item["calendar"] is not None:
        name = item["calendar"]
        values["calendar"] = Calendar.objects.filter(name=str(name)).first()
        if values["calendar"] is None:
            errors.append(f"{where}.calendar: no calendar named {name!r}")
    if errors:
        raise ApplyError(errors)
    return values


def rule_state(rule: Rule, channel_names: list[str] | None = None) -> dict[str, Any]:
    if channel_names is None:
        channel_names = [c.name for c in rule.channels.all()] if rule.pk else []
    return {
        "events": list(rule.events),
        "jobs": rule.jobs,
        "checks": rule.checks,
        "labels": list(rule.labels),
        "calendar": rule.calendar.name if rule.calendar_id else None,
        "owner": rule.owner,
        "fallback": rule.fallback,
        "failures_in_a_row": rule.failures_in_a_row,
        "slow_factor": rule.slow_factor,
        "grace": rule.grace,
        "throttle": rule.throttle,
        "digest": rule.digest,
        "channels": sorted(channel_names),
        "enabled": rule.enabled,
        "managed_by": rule.managed_by,
        "managed_source": rule.managed_source,
    }


def rule_item(rule: Rule) -> dict[str, Any]:
    """A rule as a `notify:` item (`croniq-admin export`)."""
    return as_item(RULE_FIELDS, {"name": rule.name, **rule_state(rule)})


# -- the sections ---------------------------------------------------------------


class NotifySections:
    """The `channels:` and `notify:` sections of one apply (see
    `scheduler.apply.document.add_sections`)."""

    KEYS = ("channels", "notify")
    # What docs/apply.md says of the sections (`manage.py apply_reference`).
    FIELDS = {"channels": CHANNEL_FIELDS, "notify": RULE_FIELDS}

    def __init__(self, applier) -> None:
        self.applier = applier
        self.channel_names = []  # every channel the file names, good or bad
        self.rule_names = []

    @staticmethod
    def export(select: Selection) -> dict[str, list[dict[str, Any]]]:
        """The sections as `croniq-admin export` writes them (scheduler.apply.export)."""
        channels = by_name(select(Channel.objects.all()))
        rules = select(Rule.objects.select_related("calendar").prefetch_related("channels"))
        return {
            "channels": [in_project(channel_item(c), c) for c in channels],
            "notify": [in_project(rule_item(r), r) for r in by_name(rules)],
        }

    def apply(self, sections: dict[str, Any]) -> None:
        for where, item in self.applier.check_items("channels", sections["channels"], CHANNEL_KEYS):
            self.channel_names.append(item["name"])
            self.applier.attempt(self.apply_channel, where, item)
        for where, item in self.applier.check_items("notify", sections["notify"], RULE_KEYS):
            self.rule_names.append(item["name"])
            self.applier.attempt(self.apply_rule, where, item)

    def apply_channel(self, where: str, item: dict[str, Any]) -> None:
        # Written now, inside the apply's transaction: rules refer to them.
        upsert(
            self.applier,
            "channel",
            Channel,
            item["name"],
            channel_values(where, item),
            state=channel_state,
            write=lambda channel, *_: channel.save(),
            mask=masked_channel_diff,
            project=item.get("project"),
        )

    def apply_rule(self, where: str, item: dict[str, Any]) -> None:
        errors, values = [], {}
        try:
            values = rule_values(where, item)
        except ApplyError as e:
            errors = e.errors
        names = item.get("channels")
        found = {}
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            # To a caller bound to projects, the others' channels do not exist.
            reachable = self.applier.prunable(Channel.objects.filter(name__in=names))
            found = {c.name: c for c in reachable}
            # A channel of this file that was refused has its own error already.
            errors += [
                f"{where}.channels: unknown channel {n!r}"
                for n in dict.fromkeys(names)
                if n not in found and n not in self.channel_names
            ]
        if errors:
            raise ApplyError(errors)
        names = values.pop("channels")
        if len(found) < len(names):
            return  # a refused channel of the file: its error says why

        def write(rule, *_) -> None:
            rule.save()
            rule.channels.set(found.values())

        upsert(
            self.applier,
            "rule",
            Rule,
            item["name"],
            values,
            state=rule_state,
            planned_state=lambda rule: rule_state(rule, names),
            write=write,
            project=item.get("project"),
        )

    def prune(self) -> None:
        """Delete the channels and rules this file made that it no longer
        names; never those made or adopted in the admin, or of another file."""
        managed = file_rows(self.applier.source, self.applier.managed_source)
        managed_rules = self.applier.prunable(Rule.objects.filter(managed)).exclude(
            name__in=self.rule_names
        )
        for rule in managed_rules:
            # A copy keeps the pk that delete() clears: the event's target.
            self.applier.record_change(
                "rule", rule.name, rule_state(rule), None, target=copy.copy(rule)
            )
            rule.delete()
        managed_channels = self.applier.prunable(Channel.objects.filter(managed)).exclude(
            name__in=self.channel_names
        )
        for channel in managed_channels:
            users = sorted(channel.rules.values_list("name", flat=True))
            if users:
                self.applier.errors.append(
                    f"channels: {channel.name!r} is still used by rule(s) {', '.join(users)}; "
                    "list it in the file or take it out of those rules"
                )
                continue
            before = channel_state(channel)
            self.applier.record_change(
                "channel",
                channel.name,
                before,
                None,
                mask=masked_channel_diff,
                target=copy.copy(channel),
            )
            channel.delete()
