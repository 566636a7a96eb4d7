"""Checks as code: the `checks:` section of an apply file (docs/design.md
§5, §12).

`manage.py apply` reads it through `scheduler.apply.sections.add_sections`
(registered in `ChecksConfig.ready`), in the transaction that applies the
file's calendars and jobs: one bad item refuses the whole file. The fields
are checked by `checks.items.values`, the management API's one validation
path, and its errors are named by item ("checks[2].grace: ...").

What apply creates or updates is apply's, of the file (`managed_source`),
as jobs are (core.ownership), and `--prune` deletes only that file's checks.

A check's token is its credential (whoever knows it can fake the check's
pings): apply never writes it (a new check draws its own), and it is in no
picture apply compares, plans, prints, audits or exports. Nor is a pause: it
is an operator's state (the API's `paused`), which apply leaves as it is,
as it leaves a job's (docs/design.md §10); an export names the paused checks.
"""

import copy
from datetime import datetime
from typing import Any

from django.db.models import Q

from checks import items, states
from checks.models import Check
from core import db
from core.ownership import ManagedBy
from scheduler.apply.export import Selection, as_item, by_name, in_project
from scheduler.apply.fields import REQUIRED, Field, field_names
from scheduler.apply.items import ApplyError
from scheduler.apply.planning import LOOKUP_BATCH, batched
from scheduler.apply.upsert import upsert

CHECK_FIELDS = (
    Field(
        "name",
        "slug",
        "Unique name; a notification rule's `checks` glob matches it. The ping URL's "
        "token is never in the file: a new check draws its own, and keeps it.",
        REQUIRED,
    ),
    Field("description", "text", "Free text.", ""),
    Field(
        "schedule",
        "cron or macro",
        'When pings are expected: 5-field cron ("30 2 * * *") or a macro (@daily); '
        "give either it or `period`.",
        None,
    ),
    Field("timezone", "IANA timezone", "The schedule is read in it.", "UTC"),
    Field(
        "period",
        "duration",
        "Time between pings, for a check without a schedule (at most a year).",
        None,
    ),
    Field(
        "grace",
        "duration",
        "How late a ping may be before the check is down (at most a year).",
        items.grace("grace", None),
    ),
    Field(
        "labels",
        "list of text",
        "Grouped incidents take checks labelled alike that go down together as one.",
        [],
    ),
)
CHECK_KEYS = field_names(CHECK_FIELDS)
# What apply writes on a check: its configuration and who manages it. The
# state, deadlines and counters are the pings' and the loop's, written only
# when a changed timing moves the deadlines (`items.write`).
CONFIGURATION = [key for key in items.KEYS if key != "project"]
STATUS = ["state", "last_ping_at", "last_start_at", "next_expected_at", "down_at"]


def check_state(check: Check) -> dict[str, Any]:
    """A comparable picture of a check's configuration: never its token."""
    return {
        "description": check.description,
        "schedule": check.schedule or None,
        "timezone": check.timezone,
        "period": check.period,
        "grace": check.grace,
        "labels": list(check.labels),
        "managed_by": check.managed_by,
        "managed_source": check.managed_source,
    }


def check_item(check: Check) -> dict[str, Any]:
    """A check as a `checks:` item (`croniq-admin export`), without its token."""
    return as_item(CHECK_FIELDS, {"name": check.name, **check_state(check)})


def check_values(where: str, item: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The Check field values of a `checks:` item, checked by `checks.items`;
    ApplyError naming the item and each bad field."""
    try:
        found = items.values(item, now)
    except ApplyError as e:
        raise ApplyError([f"{where}.{error}" for error in e.errors]) from None
    found.pop("project")  # the applier decides it (scheduler.apply.upsert)
    return found


def file_rows(source: str, managed_source: str) -> Q:
    """What apply of `managed_source` manages (as `notifications.applyitems`
    says it: rows stamped with the `source` are its own too)."""
    sources = {managed_source} | ({source} if source else set())
    return Q(managed_by=ManagedBy.APPLY, managed_source__in=sources)


def writes_checks(document: dict[str, Any], prune: bool, source: str, managed_source: str) -> bool:
    """Whether applying `document` may write checks: it has a `checks:`
    section, or `prune` would delete checks this file made."""
    if "checks" in document:
        return True
    return prune and Check.objects.filter(file_rows(source, managed_source)).exists()


def paused_warnings(checks: list[Check]) -> list[str]:
    paused = [check.name for check in checks if check.state == states.PAUSED]
    if not paused:
        return []
    return [
        "checks paused here, not in the document (a pause is an operator's state, which "
        f"apply leaves alone): {', '.join(paused)}; applied to a new database, they are not paused"
    ]


class CheckSections:
    """The `checks:` section of one apply (see
    `scheduler.apply.sections.add_sections`)."""

    KEYS = ("checks",)
    # What docs/apply.md says of the section (`manage.py apply_reference`).
    FIELDS = {"checks": CHECK_FIELDS}

    def __init__(self, applier: Any) -> None:
        self.applier = applier
        self.names: list[str] = []  # every check the file names, good or bad
        self.stored: dict[str, Check] = {}  # name: the check as stored, locked

    @staticmethod
    def export(select: Selection) -> dict[str, list[dict[str, Any]]]:
        """The section as `croniq-admin export` writes it (scheduler.apply.export)."""
        checks = by_name(select(Check.objects.all()))
        return {"checks": [in_project(check_item(check), check) for check in checks]}

    @staticmethod
    def export_warnings(select: Selection) -> list[str]:
        return paused_warnings(by_name(select(Check.objects.filter(state=states.PAUSED))))

    def apply(self, sections: dict[str, Any]) -> None:
        checked = self.applier.check_items("checks", sections["checks"], CHECK_KEYS)
        self.read_checks([item["name"] for _, item in checked])
        for where, item in checked:
            self.names.append(item["name"])
            self.applier.attempt(self.apply_check, where, item)

    def read_checks(self, names: list[str]) -> None:
        """The stored checks of these names, in a few queries, locked: a ping
        of one waits for the apply, so the deadlines written here are those
        of its last ping."""
        for chunk in batched(names, LOOKUP_BATCH):
            rows = db.for_update(Check.objects.filter(name__in=chunk))
            self.stored.update((check.name, check) for check in rows)

    def apply_check(self, where: str, item: dict[str, Any]) -> None:
        values = check_values(where, item, self.applier.now)
        stored = self.stored.get(item["name"])

        def write(check: Check, version: Any, before: Any, after: dict[str, Any]) -> None:
            if stored is None:
                check.save()  # new: its token drawn now, its state `new`
                return
            fields = [*CONFIGURATION, "project", "managed_by", "managed_source", "updated_at"]
            if any(before[key] != after[key] for key in items.TIMING):
                check.set_status(states.retimed(check.timing(), stored.status()))
                fields += STATUS
            check.save(update_fields=fields)

        upsert(
            self.applier,
            "check",
            Check,
            item["name"],
            values,
            stored=stored,
            state=check_state,
            clean=lambda check: None,  # `check_values` checked every field
            write=write,
            project=item.get("project"),
        )

    def prune(self) -> None:
        """Delete the checks this file made that it no longer names (their
        pings with them); never those made or adopted through the API, or of
        another file."""
        managed = file_rows(self.applier.source, self.applier.managed_source)
        for check in self.applier.prunable(Check.objects.filter(managed)).exclude(
            name__in=self.names
        ):
            # A copy keeps the pk that delete() clears: the event's target.
            target = copy.copy(check)
            self.applier.record_change("check", check.name, check_state(check), None, target=target)
            check.delete()
