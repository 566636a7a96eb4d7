"""Maintenance mode (docs/design.md §10): no claims inside an active window;
schedules keep advancing.

A `Maintenance` is what is stored, read once per operation (`load(now)`);
its methods are pure and take the instant they judge. The global switch
covers every job while it is on; a window covers `[start, end)`, every job
or, with labels, the jobs carrying one of them. Runners claim nothing a
maintenance covers (`held`); the fire step records an occurrence inside one
as skipped, or, for a job with `maintenance: defer`, keeps one pending run
for the end of the window (`covering`).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction

import audit
from core.instants import shown
from scheduler.firing import notifier
from scheduler.runs.maintenance_models import MaintenanceSwitch, MaintenanceWindow

EVERYTHING = "everything"  # `held`: no claim at all


@dataclass(frozen=True)
class Window:
    start: object
    end: object
    labels: frozenset = frozenset()
    id: int | None = None
    reason: str = ""

    def active(self, instant: datetime) -> bool:
        return self.start <= instant < self.end

    def covers_labels(self, job_labels: Iterable[str] | None) -> bool:
        """An unlabelled window covers every job; a labelled one, the jobs
        carrying one of its labels."""
        return not self.labels or bool(self.labels & set(job_labels or ()))

    def describe(self) -> str:
        """ "maintenance switch", "maintenance window 3"."""
        if self.start is None:
            return "maintenance switch"
        return f"maintenance window {self.id}" if self.id else "maintenance window"


SWITCH = Window(start=None, end=None, id=None)  # stands for the switch in `covering`


@dataclass(frozen=True)
class Maintenance:
    switch_on: bool = False
    windows: tuple = ()

    def active(self, now: datetime) -> bool:
        """Whether any maintenance is in force at `now` (the banner, the gauge)."""
        return self.switch_on or any(w.active(now) for w in self.windows)

    def active_windows(self, now: datetime) -> list[Window]:
        return [w for w in self.windows if w.active(now)]

    def held(self, now: datetime, until: datetime | None = None) -> frozenset[str] | str | None:
        """What claims must leave alone from `now` to `until` (default: at
        `now`; a claim made ahead runs at its instant): None (nothing),
        EVERYTHING, or a frozenset of labels (jobs carrying any of them)."""
        if self.switch_on:
            return EVERYTHING
        until = now if until is None else until
        labels = set()
        for window in self.windows:
            if not (window.start <= until and now < window.end):
                continue
            if not window.labels:
                return EVERYTHING
            labels |= window.labels
        return frozenset(labels) or None

    def covering(self, job_labels: Iterable[str] | None, instant: datetime) -> Window | None:
        """The maintenance an occurrence at `instant` of a job carrying
        `job_labels` falls in: SWITCH, the window that ends last, or None."""
        if self.switch_on:
            return SWITCH
        windows = [w for w in self.windows if w.active(instant) and w.covers_labels(job_labels)]
        return max(windows, key=lambda w: w.end) if windows else None


def banner(current: Maintenance, now: datetime, reason: str = "") -> str | None:
    """The admin's and the dashboard's line while a maintenance is in
    force at `now`, or None."""
    if current.switch_on:
        text = "Maintenance mode is on: runners claim no new work."
        return f"{text} {reason}" if reason else text
    windows = current.active_windows(now)
    if not windows:
        return None
    until = shown(max(w.end for w in windows), UTC)
    if any(not w.labels for w in windows):
        scope = "runners claim no new work"
    else:
        labels = ", ".join(sorted(set().union(*(w.labels for w in windows))))
        scope = f"no new work is claimed for jobs labelled {labels}"
    reasons = " ".join(w.reason for w in windows if w.reason)
    text = f"Maintenance window until {until}: {scope}."
    return f"{text} {reasons}" if reasons else text


def is_held(held: frozenset[str] | str | None, job_labels: Iterable[str] | None) -> bool:
    """Whether a claim must leave a job carrying `job_labels` alone."""
    if held is None:
        return False
    return held == EVERYTHING or bool(held & set(job_labels or ()))


def check_window(start: datetime, end: datetime) -> None:
    """ValueError naming the field when `[start, end)` is not a window."""
    if start is None:
        raise ValueError("start: required")
    if end is None:
        raise ValueError("end: required")
    if end <= start:
        raise ValueError(f"end: {end.isoformat()} is not after start {start.isoformat()}")


def check_not_ended(end: datetime, now: datetime) -> None:
    """ValueError naming the field when a window ended by `now`."""
    if end <= now:
        raise ValueError(f"end: {end.isoformat()} is already past; a window must end after now")


# Reading the stored rows


def load(now: datetime, since: datetime | None = None) -> Maintenance:
    """The maintenance as stored, with the windows not ended by `since`
    (default `now`: an occurrence due earlier may still be judged)."""
    since = since or now
    switch_on, any_windows = stored_flags(since)
    # Every firing reads this, and mostly there is nothing: one read then.
    rows = MaintenanceWindow.objects.filter(end__gt=since) if any_windows else ()
    windows = tuple(as_window(row) for row in rows)
    return Maintenance(switch_on=switch_on, windows=windows)


def stored_flags(since: datetime) -> tuple[bool, bool]:
    """(whether the switch is on, whether a window ends after `since`), in one read."""
    q = connection.ops.quote_name
    switch, windows = MaintenanceSwitch._meta.db_table, MaintenanceWindow._meta.db_table
    sql = (
        f"SELECT EXISTS (SELECT 1 FROM {q(switch)} WHERE {q('id')} = %s AND {q('on')} = %s),"
        f" EXISTS (SELECT 1 FROM {q(windows)} WHERE {q('end')} > %s)"
    )
    with connection.cursor() as cursor:
        instant = connection.ops.adapt_datetimefield_value(since)
        cursor.execute(sql, [MaintenanceSwitch.PK, True, instant])
        switch_on, any_windows = cursor.fetchone()
    return bool(switch_on), bool(any_windows)


def as_window(row: MaintenanceWindow) -> Window:
    labels = frozenset(row.labels or ())
    return Window(start=row.start, end=row.end, labels=labels, id=row.pk, reason=row.reason)


def in_force(now: datetime) -> bool:
    """Whether a maintenance is in force at `now`, in one read: every
    scrape and every admin and dashboard page asks."""
    q = connection.ops.quote_name
    switch, windows = MaintenanceSwitch._meta.db_table, MaintenanceWindow._meta.db_table
    sql = (
        f"SELECT EXISTS (SELECT 1 FROM {q(switch)} WHERE {q('on')} = %s)"
        f" OR EXISTS (SELECT 1 FROM {q(windows)} WHERE {q('start')} <= %s AND {q('end')} > %s)"
    )
    instant = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(sql, [True, instant, instant])
        return bool(cursor.fetchone()[0])


def current_banner(now: datetime) -> str | None:
    """`banner` as stored at `now`; one read while none is in force."""
    if not in_force(now):
        return None
    row = MaintenanceSwitch.objects.filter(pk=MaintenanceSwitch.PK, on=True).first()
    windows = MaintenanceWindow.objects.filter(start__lte=now, end__gt=now)
    current = Maintenance(switch_on=row is not None, windows=tuple(map(as_window, windows)))
    return banner(current, now, reason=row.reason if row else "")


def switch() -> MaintenanceSwitch:
    """The switch's row (created off on first use: the admin edits it)."""
    row, _ = MaintenanceSwitch.objects.get_or_create(pk=MaintenanceSwitch.PK)
    return row


def switch_read() -> MaintenanceSwitch:
    """The switch as stored, or off; never writes (a GET may call it)."""
    return MaintenanceSwitch.objects.filter(pk=MaintenanceSwitch.PK).first() or MaintenanceSwitch()


# Changing them, audited


def set_switch(on: bool, now: datetime, actor: object, reason: str = "") -> bool:
    """Turn the switch on or off; returns whether it changed."""
    with transaction.atomic():
        row = MaintenanceSwitch.objects.select_for_update().filter(pk=MaintenanceSwitch.PK).first()
        row = row or MaintenanceSwitch(pk=MaintenanceSwitch.PK)
        if row.on == on and (not on or row.reason == reason):
            return False
        row.on, row.reason, row.changed_at = on, reason if on else "", now
        row.save()
        action = "maintenance.on" if on else "maintenance.off"
        audit.record(action, target=row, actor=actor, at=now, data={"reason": reason})
        if not on:
            transaction.on_commit(notifier.new_work)  # held work is claimable again
    return True


def add_window(
    start: datetime,
    end: datetime,
    now: datetime,
    actor: object,
    labels: Iterable[str] = (),
    reason: str = "",
) -> MaintenanceWindow:
    """A new window; ValueError naming the field when it ends before it starts."""
    window = MaintenanceWindow(start=start, end=end, labels=sorted(set(labels)), reason=reason)
    return save_window(window, now, actor)


def save_window(window: MaintenanceWindow, now: datetime, actor: object) -> MaintenanceWindow:
    """Store a new window (built by the caller, e.g. the admin's form), audited."""
    check_window(window.start, window.end)
    with transaction.atomic():
        window.save()
        record_window("maintenance.window_created", window, now, actor)
    return window


def delete_window(window: MaintenanceWindow, now: datetime, actor: object) -> None:
    with transaction.atomic():
        record_window("maintenance.window_deleted", window, now, actor)
        window.delete()
        transaction.on_commit(notifier.new_work)


def replace_windows(wanted: list[dict[str, Any]], now: datetime, actor: object) -> None:
    """Make the windows not yet ended at `now` exactly `wanted`
    ([{start, end, labels, reason}]): equal ones stay, others are deleted
    or created, each audited. Ended windows are history and stay. All are
    checked first: ValueError naming the item and field, nothing changed.

    A window already ended at `now` is history too: one stored as it is
    stays (a client puts back what it read just as that window ended), and
    any other is refused, never stored (each identical call would store it
    again, as it is never among the windows compared)."""
    for index, item in enumerate(wanted):
        try:
            check_window(item.get("start"), item.get("end"))
        except ValueError as e:
            raise ValueError(f"windows[{index}].{e}") from None
    with transaction.atomic():
        wanted = without_stored_history(wanted, now)
        keys = [window_key(item) for item in wanted]
        current = list(MaintenanceWindow.objects.select_for_update().filter(end__gt=now))
        kept = set()
        for row in current:
            key = window_key(vars(row))
            if key in keys and key not in kept:
                kept.add(key)
            else:
                delete_window(row, now, actor)
        for key, item in zip(keys, wanted, strict=True):
            if key not in kept:
                kept.add(key)
                labels, reason = item.get("labels") or (), item.get("reason") or ""
                add_window(item["start"], item["end"], now, actor, labels=labels, reason=reason)


def without_stored_history(wanted: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """`wanted` less the ended windows stored as they are; ValueError naming
    the item for an ended window that is not stored."""
    history = {window_key(vars(row)) for row in MaintenanceWindow.objects.filter(end__lte=now)}
    kept = []
    for index, item in enumerate(wanted):
        if item["end"] > now:
            kept.append(item)
            continue
        if window_key(item) not in history:
            try:
                check_not_ended(item["end"], now)
            except ValueError as e:
                raise ValueError(f"windows[{index}].{e}") from None
    return kept


def window_key(item: dict[str, Any]) -> tuple[Any, ...]:
    labels = tuple(sorted(set(item.get("labels") or ())))
    return (item["start"], item["end"], labels, item.get("reason") or "")


def record_window(action: str, window: MaintenanceWindow, now: datetime, actor: object) -> None:
    audit.record(
        action,
        target=window,
        actor=actor,
        at=now,
        data={
            "start": window.start.isoformat(),
            "end": window.end.isoformat(),
            "labels": list(window.labels),
            "reason": window.reason,
        },
    )
