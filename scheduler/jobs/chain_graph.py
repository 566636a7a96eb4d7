"""Chains as a graph of job names: what a job's `on_success` and
`on_failure` may name. Pure, but for `lock`: callers pass the graph
({name: (on_success, on_failure)}) of the other jobs as they stand.

Two writers each checking one new edge against the graph as stored could
each pass and together store a cycle (a -> b on one web process, b -> a on
another). So every writer of chain edges checks them under `lock`, inside
the transaction that writes them, and the later writer sees the earlier
one's edges.
"""

from core import db

FIELDS = ("on_success", "on_failure")

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


def problems(
    name: str,
    on_success: list[str],
    on_failure: list[str],
    graph: dict[str, tuple[list[str], list[str]]],
) -> dict[str, str]:
    """{field: message} for chains of the job `name` that name a missing
    job or close a cycle through it, given the other jobs' `graph`."""
    found = {}
    edges = {"on_success": on_success, "on_failure": on_failure}
    for field, names in edges.items():
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            found[field] = "a list of job names"
    if found:
        return found
    graph = {**graph, name: (list(on_success), list(on_failure))}
    for field, names in edges.items():
        missing = [n for n in names if n not in graph]
        if missing:
            found[field] = f"no job named {missing[0]!r}"
    if found:
        return found
    cycle = find_cycle(graph, name)
    if cycle:
        field = "on_success" if cycle[1] in on_success else "on_failure"
        found[field] = "the chain forms a cycle: " + " -> ".join(cycle)
    return found


def find_cycle(graph: dict[str, tuple[list[str], list[str]]], start: str) -> list[str] | None:
    """[start, ..., start] when a chain from `start` leads back to it."""
    path, seen = [start], set()

    def walk(name):
        success, failure = graph.get(name, ([], []))
        for nxt in [*success, *failure]:
            if nxt == start:
                return [*path, start]
            if nxt in seen or nxt not in graph:
                continue
            seen.add(nxt)
            path.append(nxt)
            found = walk(nxt)
            if found:
                return found
            path.pop()
        return None

    return walk(start)
