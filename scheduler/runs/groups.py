"""Concurrency groups at claim time: a group's jobs never run more than its
budget at once, across every web process (docs/design.md §10).

A claim transaction builds one `Budget`. Before choosing work it leaves
out the groups that are full (a plain read, so work outside them, and in
groups with room, is not held back behind theirs: no starvation). Once it
has chosen, it locks the rows of the groups it chose for, in id order, and
counts their running executions again: two web processes claiming for one
group take turns on its row, and the second counts what the first handed
out. SQLite's claim transaction holds the database's write lock already.
Chosen work beyond a group's room is left pending, oldest kept (FIFO within
the group). A database error aborts the claim: nothing is handed out
unchecked (fail closed).
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import connection

from core import db
from scheduler.models import Execution, Job
from scheduler.runs.concurrency_models import ConcurrencyGroup


def running_counts(group_ids: Iterable[int] | None = None) -> dict[int, int]:
    """{group id: running executions of its jobs}, in one statement.

    Driven by the running executions (few: at most the runners' capacity,
    through the `exec_running_lease` index), joined to their jobs. The
    groups are chosen here, not in the query: with them in it, PostgreSQL
    planned the join from the group's jobs, walking every job of a large
    group under the group's row lock. Not through the process either: with
    a thousand runs going, sending their job ids back to ask for the jobs
    cost 12 ms a claim on PostgreSQL, twice a claim, under that lock
    (bench/dispatch_latency.py --only burst,group_throughput).
    """
    quote = connection.ops.quote_name
    group = quote("concurrency_group_id")
    sql = (
        f"SELECT j.{group}, COUNT(*) FROM {quote(Execution._meta.db_table)} e"
        f" JOIN {quote(Job._meta.db_table)} j ON j.id = e.{quote('job_id')}"
        f" WHERE e.{quote('state')} = %s AND j.{group} IS NOT NULL GROUP BY j.{group}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [Execution.RUNNING])
        counts: dict[int, int] = dict(cursor.fetchall())
    if group_ids is not None:
        wanted = set(group_ids)
        counts = {pk: n for pk, n in counts.items() if pk in wanted}
    return counts


class Budget:
    """The room left in each concurrency group during one claim transaction."""

    def __init__(self) -> None:
        budgets = dict(ConcurrencyGroup.objects.values_list("pk", "max_concurrent"))
        self.exists = bool(budgets)
        self.room: dict[int, int] = {}
        if self.exists:
            used = running_counts()
            self.room = {pk: budget - used.get(pk, 0) for pk, budget in budgets.items()}
        self.locked: set[int] = set()

    def full(self) -> list[int]:
        """Ids of the groups with no room left (their work is not chosen)."""
        return sorted(pk for pk, left in self.room.items() if left <= 0)

    def take(self, executions: list[Execution]) -> list[Execution]:
        """The executions (job loaded, oldest first) that fit their groups'
        room, counted as taken; the others stay pending."""
        if not self.exists:
            return executions
        wanted = {e.job.concurrency_group_id for e in executions} - {None} - self.locked
        if wanted:
            self.recount(wanted)
        kept: list[Execution] = []
        for execution in executions:
            group = execution.job.concurrency_group_id
            if group is not None:
                if self.room.get(group, 0) <= 0:
                    continue
                self.room[group] -= 1
            kept.append(execution)
        return kept

    def recount(self, group_ids: Iterable[int]) -> None:
        """Lock these groups' rows (PostgreSQL) and count their running
        executions as committed now."""
        ordered = sorted(group_ids)
        groups = ConcurrencyGroup.objects.filter(pk__in=ordered).order_by("pk")
        groups = db.for_update(groups)
        budgets = dict(groups.values_list("pk", "max_concurrent"))
        used = running_counts(ordered)
        for pk in ordered:
            # A group deleted meanwhile holds nothing back (its jobs' link is gone).
            self.room[pk] = budgets[pk] - used.get(pk, 0) if pk in budgets else 1 << 30
        self.locked.update(ordered)


def usage(now: datetime) -> list[dict[str, Any]]:
    """[{name, budget, running, waiting, jobs}] of every concurrency group:
    what the dashboard shows. `waiting`: its ready pending executions."""
    from django.db.models import Count, Q

    groups = ConcurrencyGroup.objects.annotate(job_count=Count("jobs")).order_by("name")
    rows = list(groups.values_list("pk", "name", "max_concurrent", "job_count"))
    if not rows:
        return []
    running = running_counts()
    ready = Q(state=Execution.PENDING, run_after__lte=now)
    waiting = dict(
        Execution.objects.filter(ready, job__concurrency_group__isnull=False)
        .values_list("job__concurrency_group")
        .annotate(n=Count("pk"))
    )
    return [
        {
            "name": name,
            "budget": budget,
            "running": running.get(pk, 0),
            "waiting": waiting.get(pk, 0),
            "jobs": jobs,
        }
        for pk, name, budget, jobs in rows
    ]
