"""Chains and requirements as a graph of job names: what a job's
`on_success`, `on_failure` and `requires` may name. Pure, but for `lock`:
callers pass the graph ({name: (on_success, on_failure, requires)}) of the
other jobs as they stand. An edge runs from a job to what comes after it:
the jobs it chains to, and the jobs that require it; no cycle may close.

Two writers each checking one new edge against the graph as stored could
each pass and together store a cycle (a -> b on one web process, b -> a on
another). So every writer of chain edges checks them under `lock`, inside
the transaction that writes them, and the later writer sees the earlier
one's edges.
"""

from functools import cached_property
from typing import Any

from core import db

FIELDS = ("on_success", "on_failure")
# The fields whose names are edges of the graph: chains, and requirements
# (`requires`, whose entries name a job each).
GRAPH_FIELDS = (*FIELDS, "requires")

# The key of the transaction-level advisory lock chain writers take turns on
# (PostgreSQL). Per transaction, not per session: it holds behind PgBouncer
# in transaction mode, and ends with the commit that stores the edges.
GRAPH_LOCK = 0x63686E73  # "chns"


def lock() -> None:
    """Take the chain graph's lock until the current transaction ends: the
    graph read after it includes every edge committed before, and no other
    writer checks edges until this transaction has committed its own.
    SQLite needs none: its transactions take the write lock at BEGIN
    (IMMEDIATE), so any write transaction already holds the graph."""
    db.advisory_xact_lock(GRAPH_LOCK)


class Graph(dict):
    """{name: (on_success, on_failure[, required job names])} of the jobs,
    with the jobs that require each (read once, however many jobs an apply
    checks against it). A requirement is an edge too: the required job's
    run comes before the requiring job's (docs/design.md §14)."""

    @cached_property
    def dependents(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for name, edges in self.items():
            for needed in required(edges):
                found.setdefault(needed, []).append(name)
        return found


def required(edges: tuple) -> list[str]:
    """The required job names of a graph entry (none in a chains-only one)."""
    if len(edges) < 3 or not isinstance(edges[2], list):
        return []
    names = [e.get("job") if isinstance(e, dict) else e for e in edges[2]]
    return [name for name in names if isinstance(name, str)]


def graph_of(rows: Any) -> Graph:
    """The Graph of `values_list("name", *GRAPH_FIELDS)` rows."""
    return Graph((n, (s or [], f or [], required((s, f, r)))) for n, s, f, r in rows)


def problems(
    name: str,
    on_success: list[str],
    on_failure: list[str],
    graph: dict[str, tuple],
    requires: list[str] = (),
) -> dict[str, str]:
    """{field: message} for chains and requirements of the job `name` that
    name a missing job or close a cycle through it, given the other jobs'
    `graph`; `requires`: the names of the jobs it requires."""
    found = {}
    edges = {"on_success": on_success, "on_failure": on_failure}
    for field, names in edges.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            found[field] = "a list of job names"
    if found:
        return found
    for field, names in edges.items():
        missing = [n for n in names if n not in graph and n != name]
        if missing:
            found[field] = f"no job named {missing[0]!r}"
    for index, needed in enumerate(requires):
        if needed not in graph and needed != name:
            found[f"requires[{index}].job"] = f"no job named {needed!r}"
    if found:
        return found
    graph = graph if isinstance(graph, Graph) else Graph(graph)
    own = (list(on_success), list(on_failure), list(requires))
    for field, cycle in cycles(graph, name, own):
        found.setdefault(field, describe(graph, name, own, cycle))
    return found


def cycles(graph: Graph, name: str, own: tuple) -> Any:
    """(field, [name, ..., name]) for each edge of the job's own that a cycle
    through it takes, at most one per field."""
    after = successors(graph, name, own)
    for field, targets in (("on_success", own[0]), ("on_failure", own[1])):
        for target in targets:
            path = path_between(after, target, name)
            if path:
                yield field, [name, *path]
                break
    for index, needed in enumerate(own[2]):
        path = path_between(after, name, needed)
        if path:
            yield f"requires[{index}].job", [*path, name]


def successors(graph: Graph, name: str, own: tuple) -> Any:
    """The jobs that come right after a job: those it chains to and those
    that require it, with `name`'s edges as `own`, not as stored."""

    def after(job: str) -> list[str]:
        edges = own if job == name else graph.get(job, ([], []))
        chained = [*edges[0], *edges[1]]
        dependents = [d for d in graph.dependents.get(job, ()) if d != name]
        if job in own[2]:
            dependents.append(name)
        return [*chained, *dependents]

    return after


def path_between(after: Any, start: str, end: str) -> list[str] | None:
    """[start, ..., end] along `after`'s edges (breadth first), or None."""
    if start == end:
        return [start]
    previous = {start: None}
    frontier = [start]
    while frontier:
        reached = []
        for job in frontier:
            for nxt in after(job):
                if nxt in previous:
                    continue
                previous[nxt] = job
                if nxt == end:
                    path = [end]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return path[::-1]
                reached.append(nxt)
        frontier = reached
    return None


def describe(graph: Graph, name: str, own: tuple, cycle: list[str]) -> str:
    """'the chain forms a cycle: a -> b -> a', or with a requirement in it
    'chains and requirements form a cycle: ...'."""

    def chained(a: str, b: str) -> bool:
        edges = own if a == name else graph.get(a, ([], []))
        return b in edges[0] or b in edges[1]

    path = " -> ".join(cycle)
    links = [chained(a, b) for a, b in zip(cycle, cycle[1:], strict=False)]
    if all(links):
        return "the chain forms a cycle: " + path
    what = "chains and requirements" if any(links) else "requirements"
    return f"{what} form a cycle: {path} (each must run before the next)"


def find_cycle(graph: dict[str, tuple], start: str) -> list[str] | None:
    """[start, ..., start] when a chain or requirement from `start` leads back to it."""
    graph = graph if isinstance(graph, Graph) else Graph(graph)
    edges = graph.get(start, ([], []))
    own = (list(edges[0]), list(edges[1]), required(edges))
    for _, cycle in cycles(graph, start, own):
        return cycle
    return None
