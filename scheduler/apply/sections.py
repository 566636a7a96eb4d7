"""The top-level sections of an apply file: the scheduler's own, and those
apps above it add (the notifications app: `channels` and `notify`,
docs/design.md §9) with `add_sections`, so the scheduler reads them without
importing those apps, and their items are applied in the same transaction
as jobs and calendars."""

from collections.abc import Callable
from typing import Any

BUILT_IN_SECTIONS = ("projects", "calendars", "concurrency_groups", "jobs")
# [(keys, factory)] added by apps above the scheduler, in the order applied.
_sections = []


def add_sections(keys: tuple[str, ...], factory: Callable[..., Any]) -> None:
    """Accept the top-level `keys` in apply files, applied by `factory`.

    For each apply, after calendars and jobs, `factory(applier)` makes an
    object whose `apply({key: [items]})` checks and writes the items inside
    the apply's transaction (errors go to `applier.errors`, naming item and
    field; changes to `applier.record_change`) and whose `prune()` deletes
    what the file no longer names, before jobs and calendars are pruned.
    `factory.export(select)` gives {key: [items]} of what is stored, for
    `croniq-admin export` (scheduler.apply.export), which refuses a
    section without it; `factory.export_warnings(select)`, when it has one,
    what the person exporting should know of them. Adding the same keys
    again replaces their factory.
    """
    keys = tuple(keys)
    _sections[:] = [(k, f) for k, f in _sections if k != keys]
    _sections.append((keys, factory))


def added_sections() -> list[tuple[tuple[str, ...], Callable[..., Any]]]:
    """[(keys, factory)] of the sections apps added, in the order applied."""
    return list(_sections)


def section_keys() -> list[str]:
    return [*BUILT_IN_SECTIONS, *(key for keys, _ in _sections for key in keys)]
