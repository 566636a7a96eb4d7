"""Claiming ready executions for runners.

Claiming is atomic: PostgreSQL locks the chosen pending rows with
`FOR UPDATE SKIP LOCKED` (two web processes never hand out the same row and
never wait for each other); SQLite runs the claim in an IMMEDIATE
transaction, which already holds the database's write lock. A poll claims
for itself (`claim`); the hub claims for all its waiting polls at once
(`serve_waiters`).
"""

import collections
import typing
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, Count, F, Q, QuerySet, Value, When
from django.db.models.functions import Greatest

from core import db
from dispatch import identity
from dispatch.refusals import Refused
from runners.models import JOB_FEATURES, Runner, feature_marks, split_requirements
from scheduler.models import Execution, Job
from scheduler.runs import groups, lifecycle, maintenance, spans
from vault import references, resolution

CLAIM_ORDER = ("run_after", "scheduled_for", "id")
# What a claim reads of an execution and its job: the assignment, the
# dealing (labels, pins, groups) and the claim's own writes. The rest of
# a job (about 45 columns) cost 7 of the 15 ms of Python a burst of 280
# executions took to read.
CLAIMED_FIELDS = (
    "id",
    "scheduled_for",
    "attempt",
    "trigger",
    "run_after",
    "pinned_to",
    "env",
    "lease",
    "job",
    "job__name",
    "job__command",
    "job__env",
    "job__timeout",
    "job__labels",
    "job__concurrency_group",
    "job__stdin",
    "job__run_as",
    "job__kind",
    "job__http",
    "job__container",
    "traceparent",
    "job__max_output",
    "job__on_max_output",
    "job__max_memory",
    "job__max_cpu_seconds",
)


class Handed(typing.NamedTuple):
    """What was claimed for one poll: its assignments, the instant before
    which the poll must not answer (None: at once), and when each assigned
    execution became ready (its `run_after`, for the dispatch latency)."""

    assignments: list
    not_before: object = None
    ready_at: tuple = ()


# What one claim hands to one poll: its runner, session and executions.
Claim = tuple[Runner, str, list[Execution]]
# The executions whose job needs none of a feature (docs/design.md §4): no
# stdin, no run_as, a kind other than http or container, no limit an agent
# must enforce. Those kinds are told by their kind, which is what an older
# agent would misread (it would run the empty command); a limited job by the
# limits an older agent would ignore (`Job.needs_limits`: it would run
# unbounded, or to success past its output).
UNNEEDED = {
    "stdin": Q(job__stdin=""),
    "run_as": Q(job__run_as=""),
    "http": ~Q(job__kind=Job.HTTP),
    "container": ~Q(job__kind=Job.CONTAINER),
    "limits": Q(job__max_memory__isnull=True, job__max_cpu_seconds__isnull=True)
    & ~Q(job__on_max_output=Job.FAIL),
}
# The features that are job fields of the same name, sent as they are.
SENT_AS_IS = ("stdin", "run_as", "http", "container")
# Whether an execution's job needs each feature (`understood`), read with
# its labels where the labels are matched in Python.
NEEDS = {
    feature: Case(When(UNNEEDED[feature], then=Value(False)), default=Value(True))
    for feature in JOB_FEATURES
}
# What a maintenance holds back (`scheduler.runs.maintenance.Maintenance.held`).
Held = frozenset[str] | str | None


def lease_deadline(now: datetime) -> datetime:
    return now + timedelta(seconds=settings.CRONIQ_LEASE_TTL)


def claim(runner: Runner, session: str, capacity: int, now: datetime) -> list[Execution]:
    """Claim up to `capacity` ready executions the runner's labels allow.

    Returns them (job loaded) oldest first; an empty list when the runner is
    draining, nothing matches or a maintenance holds it.
    """
    if capacity <= 0 or runner.is_drained:
        return []
    if not ready_executions(now).exists():
        # Most polls find nothing (the hub claimed the instant's work ahead
        # for the waiting ones): one read instead of the maintenance, group
        # and claim queries.
        return []
    # Part of the caller's transaction when there is one (a poll reads its
    # runner, touches it and claims in one).
    with transaction.atomic(savepoint=False):
        held = maintenance.load(now).held(now)
        executions = claimable(
            runner.fits, capacity, now, held=held, budget=groups.Budget(), names=(runner.name,)
        )
        if not executions:
            return []
        hand_over([(runner, session, executions)], now)
    return executions


def hand_over(claims: list[Claim], now: datetime) -> None:
    """Mark executions as claimed, in one UPDATE: `claims` is
    [(runner, session, [execution, ...])], the executions read and locked by
    this transaction.

    The rows are ours alone until the commit (locked on PostgreSQL; on
    SQLite the transaction holds the write lock), so the new values are set
    on the objects read instead of reading them again.
    """
    deadline = lease_deadline(now)
    # By design: PostgreSQL sets each row from a VALUES list, SQLite through CASEs.
    if len(claims) > 1 and db.on_postgres():
        mark_claimed_from_values(claims, now, deadline)
    else:
        if len(claims) == 1:
            [(runner, session, _)] = claims
            runner_id, session_of = runner.pk, session
        else:
            runner_id = Case(*(when_among(e, Value(r.pk)) for r, _, e in claims))
            session_of = Case(*(when_among(e, Value(s)) for _, s, e in claims))
        ids = [e.pk for _, _, claimed in claims for e in claimed]
        Execution.objects.filter(pk__in=ids).update(
            state=Execution.RUNNING,
            runner_id=runner_id,
            session=session_of,
            lease=F("lease") + 1,
            lease_expires_at=deadline,
            # A claim made ahead of the instant (`dispatch.hub.CLAIM_AHEAD`)
            # reaches the runner at the instant: that is when it started.
            claimed_at=Greatest(Value(now), F("run_after")),
        )
    for runner, session, executions in claims:
        for execution in executions:
            execution.state = Execution.RUNNING
            execution.runner = runner
            execution.session = session
            execution.lease += 1
            execution.lease_expires_at = deadline
            execution.claimed_at = max(now, execution.run_after)


def mark_claimed_from_values(claims: list[Claim], now: datetime, deadline: datetime) -> None:
    """hand_over's UPDATE on PostgreSQL for several runners: each row's
    runner and session joined from a VALUES list.

    The ORM's form, a CASE with one WHEN per runner for each of the two
    columns, took 45 ms of Python to build for a burst of 280 executions
    dealt to 250 polls: half of the hub's step, which every poll of the
    burst waits for (bench/top_of_band.py). SQLite keeps it: it has no
    round trips to save, and a small install's bursts are small.
    """
    table = connection.ops.quote_name(Execution._meta.db_table)
    rows = [
        (execution.pk, runner.pk, session)
        for runner, session, executions in claims
        for execution in executions
    ]
    values = ", ".join(["(%s::bigint, %s::bigint, %s::text)"] * len(rows))
    sql = (
        f"UPDATE {table} SET state = %s, runner_id = v.runner, session = v.runner_session, "
        f"lease = {table}.lease + 1, lease_expires_at = %s, "
        # Claimed ahead of the instant: it reached the runner at the instant.
        f"claimed_at = GREATEST(%s, {table}.run_after) "
        f"FROM (VALUES {values}) AS v(claimed, runner, runner_session) "
        f"WHERE {table}.id = v.claimed"
    )
    params = [Execution.RUNNING, deadline, now] + [value for row in rows for value in row]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def when_among(executions: Iterable[Execution], value: Any) -> When:
    return When(pk__in=[e.pk for e in executions], then=value)


def ready_executions(now: datetime) -> QuerySet[Execution]:
    return Execution.objects.filter(
        state=Execution.PENDING, run_after__lte=now, cancel_requested_at__isnull=True
    ).order_by(*CLAIM_ORDER)


def claimable(
    labels: Iterable[str],
    capacity: int,
    now: datetime,
    exclude: Iterable[int] = (),
    held: Held = None,
    budget: groups.Budget | None = None,
    names: Iterable[str] = (),
    others: Iterable[Iterable[str]] = (),
) -> list[Execution]:
    """The oldest ready executions whose job labels are all in `labels` (job
    loaded; `labels` is a runner's `fits`: a job needing a feature whose mark
    it lacks is left out, see `understood`), leaving out the ids in `exclude`
    (taken by this transaction),
    the jobs a maintenance holds (`held`, see `Maintenance.held`), runs
    pinned to a runner not in `names` (run_on: all) and, with a `budget`
    (`scheduler.runs.groups.Budget`), what would overrun a concurrency group.
    With `others` (the label sets of other waiting runners), the work none
    of them fits comes first, then the rest, each oldest first."""
    if held == maintenance.EVERYTHING:
        return []
    ready = ready_executions(now).select_related("job").only(*CLAIMED_FIELDS)
    ready = ready.filter(Q(pinned_to="") | Q(pinned_to__in=list(names)))
    ready = ready.filter(understood(labels))
    if exclude:
        ready = ready.exclude(pk__in=list(exclude))
    if budget is None or not budget.exists:
        return choose(ready, labels, capacity, held, others)
    chosen = []
    while len(chosen) < capacity:
        # Full groups are left out of the query, so work behind them (outside
        # the group, or in a group with room) is reached: no starvation.
        # What `take` turns away filled its group: the next round leaves it out.
        rest = ready.exclude(job__concurrency_group__in=budget.full())
        found = choose(
            rest.exclude(pk__in=[e.pk for e in chosen]),
            labels,
            capacity - len(chosen),
            held,
            others,
        )
        kept = budget.take(found)
        chosen += kept
        if len(kept) == len(found):
            break
    return sorted(chosen, key=claim_order)


def understood(fits: Iterable[str]) -> Q:
    """The executions whose job needs no feature missing from `fits`
    (`runners.models.Runner.fits`): an agent that did not announce `stdin`
    would run the command without its input, one without `run_as` as the
    wrong user (docs/design.md §4)."""
    _, features = split_requirements(fits)
    condition = Q()
    for feature in JOB_FEATURES:
        if feature not in features:
            condition &= UNNEEDED[feature]
    return condition


def choose(
    ready: QuerySet[Execution],
    labels: Iterable[str],
    capacity: int,
    held: Held,
    others: Iterable[Iterable[str]] = (),
) -> list[Execution]:
    """Up to `capacity` of `ready` that `labels` fit and no maintenance holds;
    what none of `others` fits first."""
    mine = set(labels)
    others = [set(other) for other in others]
    if any(mine <= other for other in others):
        others = []  # a wider set fits all this one does: nothing comes first
    # By design: PostgreSQL fits labels in SQL and skips locked rows; SQLite in Python.
    if db.on_postgres():
        # Only the labels: a feature's mark holds a NUL, which jsonb refuses
        # (the features are matched by `understood`).
        chosen = ready.filter(job__labels__contained_by=split_requirements(labels)[0])
        if held:
            # jsonb ?| on an array: does it hold any of these strings?
            chosen = chosen.exclude(job__labels__has_any_keys=sorted(held))
        if others:
            elsewhere = Q()
            for other in others:
                elsewhere |= Q(job__labels__contained_by=split_requirements(other)[0]) & understood(
                    other
                )
            shared = Case(When(elsewhere, then=Value(1)), default=Value(0))
            chosen = chosen.alias(shared=shared).order_by("shared", *CLAIM_ORDER)
        chosen = chosen.select_for_update(skip_locked=True, of=("self",))
        return list(chosen[:capacity])
    # SQLite has no JSON containment; the IMMEDIATE transaction holds the
    # write lock, so filtering in Python here cannot race another claim.
    ids, shared = [], []
    rows = ready.annotate(**NEEDS).values_list("id", "job__labels", *NEEDS)
    for pk, job_labels, *needed in rows.iterator(chunk_size=500):
        features = [feature for feature, needs in zip(NEEDS, needed, strict=True) if needs]
        needs = set(job_labels or ()) | feature_marks(features)
        if not needs <= mine or maintenance.is_held(held, job_labels):
            continue
        if any(needs <= other for other in others):
            if len(shared) < capacity:
                shared.append(pk)
            continue
        ids.append(pk)
        if len(ids) == capacity:
            break
    ids += shared[: capacity - len(ids)]
    return list(ready.filter(pk__in=ids)) if ids else []


def assignment(execution: Execution) -> dict[str, Any]:
    """The contract's Assignment for a claimed execution (docs/design.md §4)."""
    job = execution.job
    given = {
        "id": execution.pk,
        "job": job.name,
        "command": job.command,
        # A manual trigger's overrides (declared job parameters) win.
        "env": {**(job.env or {}), **(execution.env or {})},
        "timeout": job.timeout,
        "scheduled_for": execution.scheduled_for,
        "attempt": execution.attempt,
        "lease": execution.lease,
        "lease_expires_at": execution.lease_expires_at,
        # How the run came about, for the agent's CRONIQ_TRIGGER; older
        # agents ignore it.
        "trigger": execution.trigger,
        # The job's TRACEPARENT (docs/design.md §15); none for an execution
        # stored before trace contexts.
        "traceparent": execution.traceparent,
    }
    # Only when set (docs/design.md §4), so other assignments stay as they
    # were; only runners that announced the feature claim such a job
    # (`understood`).
    for feature in SENT_AS_IS:
        if getattr(job, feature):
            given[feature] = getattr(job, feature)
    if job.kind != Job.SHELL:
        given["kind"] = job.kind  # the request is `http`, the image `container`, sent above
    given.update(limits(job))
    return given


def limits(job: Job) -> dict[str, Any]:
    """A run's limits as its assignment carries them (docs/design.md §15):
    `max_output` always (the bytes its log keeps: older agents ignore it and
    the server cuts the log there, `dispatch.leases.fit_log`); the others only
    when the job sets them, and then only agents that announced `limits`
    claim it (`understood`). `success_exit_codes` stays on the server, which
    reads it when the run ends."""
    given: dict[str, Any] = {"max_output": job.output_limit}
    if job.on_max_output != Job.TRUNCATE:
        given["on_max_output"] = job.on_max_output
    if job.max_memory:
        given["max_memory"] = job.max_memory
    if job.max_cpu_seconds:
        given["max_cpu_seconds"] = job.max_cpu_seconds
    return given


def wanted(runner: Runner, capacity: int | None) -> int:
    """How many executions a poll asks for: its `capacity`, else the runner's."""
    return runner.capacity if capacity is None else capacity


def answer(runner: Runner, executions: list[Execution], now: datetime) -> Handed:
    """A poll's `Handed` (after the commit); a flapping mark may clear here."""
    if runner.flapping:
        identity.check_flapping(runner, now)
    spans.claimed(runner.name, executions, now)
    given, executions = with_secrets(executions, now)
    return Handed(
        given,
        not_before(executions, now) if executions else None,
        tuple(e.run_after for e in executions),
    )


def with_secrets(
    executions: list[Execution], now: datetime
) -> tuple[list[dict[str, Any]], list[Execution]]:
    """The assignments of `executions`, their jobs' `${secret:NAME}`
    references resolved (docs/design.md §11): in `env`, in an http job's
    url, header values and body, and in a container job's env (§15); and
    the executions handed.

    Resolved here, after the claim's commit and only into what this poll
    answers: the value never reaches a row. A run whose secret is gone or
    cannot be decrypted fails at once, unstarted, its error saying which
    (its job's retry policy applies: the secret may be restored).
    """
    given = [assignment(e) for e in executions]
    texts = [(e.job.env or {}, kind_texts(e.job)) for e in executions]
    needing = [i for i, pair in enumerate(texts) if any(references.has_reference(t) for t in pair)]
    if not needing:
        return given, executions
    # A job reads the secrets of its own project alone (docs/design.md §11).
    asked = [(executions[i].job.project, text) for i in needing for text in texts[i]]
    found = resolution.resolve_many(asked)
    failed = set()
    for n, i in enumerate(needing):
        execution = executions[i]
        job = execution.job
        env, own = found[2 * n], found[2 * n + 1]
        problem = unresolved(env, own, job.kind)
        if problem is not None:
            lifecycle.settle(execution, Execution.FAILED, now, error=f"not started: {problem}")
            failed.add(i)
            continue
        # A manual trigger's overrides are sent as given, never resolved.
        given[i]["env"] = {**env.env, **(execution.env or {})}
        if own.env and job.kind == Job.HTTP:
            given[i]["http"] = resolved_request(job.http, own.env)
        elif own.env and job.kind == Job.CONTAINER:
            given[i]["container"] = resolved_container(job.container, own.env)
        redact = sorted({*env.redact, *own.redact}, key=len, reverse=True)
        if redact:
            given[i]["redact"] = redact
    kept = [i for i in range(len(executions)) if i not in failed]
    return [given[i] for i in kept], [executions[i] for i in kept]


def kind_texts(job: Job) -> dict[str, str]:
    """The texts of what an http or container job does that may hold
    `${secret:NAME}`, by their path in its field (`url`, `headers.NAME`;
    `env.NAME`); {} for a shell job."""
    if job.kind == Job.HTTP:
        return request_texts(job)
    if job.kind == Job.CONTAINER and isinstance(job.container, dict):
        env = job.container.get("env") or {}
        return {f"env.{name}": value for name, value in env.items()}
    return {}


def request_texts(job: Job) -> dict[str, str]:
    """The texts of an http job's request that may hold `${secret:NAME}`,
    by their path in `http` (`url`, `body`, `headers.NAME`); {} for another
    kind."""
    if job.kind != Job.HTTP or not isinstance(job.http, dict):
        return {}
    texts = references.request_texts(job.http)
    return {path: text for path, text in texts.items() if text or path.startswith("headers.")}


def resolved_request(http: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """`http` with its texts (`request_texts`) as resolved."""
    request = {**http, **{key: texts[key] for key in ("url", "body") if key in texts}}
    headers = http.get("headers") or {}
    if headers:
        request["headers"] = {name: texts[f"headers.{name}"] for name in headers}
    return request


def resolved_container(container: dict[str, Any], texts: dict[str, str]) -> dict[str, Any]:
    """`container` with its env (`kind_texts`) as resolved."""
    env = container.get("env") or {}
    return {**container, "env": {name: texts[f"env.{name}"] for name in env}}


def unresolved(
    env: resolution.Resolved | resolution.Unresolved,
    own: resolution.Resolved | resolution.Unresolved,
    kind: str,
) -> str | None:
    """Why a run's secrets cannot be read (its env's first), or None. The
    resolution names what it reads `env.PATH`: the path of what an http or
    container job does is in the field named after its kind."""
    if isinstance(env, resolution.Unresolved):
        return str(env)
    if isinstance(own, resolution.Unresolved):
        return f"{kind}." + str(own).removeprefix("env.")
    return None


def serve_waiters(
    waiters: list[Any], now: datetime, until: datetime
) -> list[tuple[Any, Handed | Refused]]:
    """Claim ready work for waiting polls in one transaction.

    The oldest ready executions are dealt round the polls they fit (their
    runners' labels include the job's), longest-waiting first, each poll up
    to its capacity: a burst is handed out in one step instead of a claim per
    poll. Work ready by `until` (later than `now`) is claimed ahead too: its
    poll answers at the work's instant (`Handed.not_before`), the claim's
    database work already done. Returns [(waiter, Handed or the Refused its
    poll answers)].
    """
    if not ready_executions(until).exists():
        # Most scans (a poll joining the hub, the safety net) find nothing:
        # one read, and no write transaction (on SQLite, no write lock).
        return []
    with transaction.atomic():
        room, refused = runners_with_room(waiters)
        held = maintenance.load(now).held(now, until) if room else None
        handed = hand_out(room, until, held, groups.Budget()) if room else {}
        if handed:
            claims = [(room[w][0], w.session, executions) for w, executions in handed.items()]
            identity.touch_many({runner.pk: runner for runner, _, _ in claims}.values(), now)
            hand_over(claims, now)
    served = [(waiter, answer(room[waiter][0], got, now)) for waiter, got in handed.items()]
    return refused + served


def not_before(executions: Iterable[Execution], now: datetime) -> datetime | None:
    """The instant the last of `executions` becomes ready, if after `now`."""
    latest = max(e.run_after for e in executions)
    return latest if latest > now else None


def runners_with_room(
    waiters: list[Any],
) -> tuple[dict[Any, tuple[Runner, int]], list[tuple[Any, Refused]]]:
    """({waiter: (runner, how many it takes)}, [(waiter, refusal)]): the waiters
    still entitled to work, and the refused ones (superseded, forgotten)."""
    runners = Runner.objects.in_bulk({w.runner_id for w in waiters})
    still_open = open_runs([w.runner_id for w in waiters if refills(w)])
    room, refused = {}, []
    for waiter in waiters:
        try:
            runner = identity.check_caller(
                runners.get(waiter.runner_id), waiter.token, waiter.runner_id, waiter.session
            )
        except Refused as refusal:
            refused.append((waiter, refusal))
            continue
        want = wanted(runner, waiter.capacity)
        if refills(waiter):
            want = max(want, waiter.slots - still_open.get(runner.pk, 0))
        if not runner.is_drained and want > 0:
            room[waiter] = (runner, want)
    return room, refused


def refills(waiter: Any) -> bool:
    """Whether a waiting poll takes the slots its runner's runs free while
    it waits: it said how many slots its runner has (`slots`), and more
    than it asked for (`capacity`) when it was sent.

    A poll's `capacity` is its runner's free slots when it was sent; a run
    that ends while the poll waits frees one more. Without this that slot
    waited for the poll's answer and the next poll: with the work of an
    instant filling the runners' waiting polls exactly, a run claimed a
    moment late went to a poll sent after the instant
    (bench/web_processes.py, two and four web processes).
    """
    return waiter.slots is not None and waiter.slots > (waiter.capacity or 0)


def open_runs(runner_ids: Collection[int]) -> dict[int, int]:
    """{runner id: executions the server counts as running on it}. A run
    whose finish is on its way still counts: a runner is never offered more
    than the slots it has free, only sometimes fewer."""
    if not runner_ids:
        return {}
    rows = (
        Execution.objects.filter(runner_id__in=runner_ids, state=Execution.RUNNING)
        .values("runner_id")
        .annotate(count=Count("id"))
        .values_list("runner_id", "count")
    )
    return dict(rows)


def hand_out(
    room: dict[Any, tuple[Runner, int]],
    now: datetime,
    held: Held = None,
    budget: groups.Budget | None = None,
) -> dict[Any, list[Execution]]:
    """{waiter: [execution, ...]}: ready work, oldest first, dealt round the
    waiters it fits in turn, longest-waiting first.

    Dealing spreads an instant's work over the runners instead of filling
    the first poll to its capacity: the load is shared, and every runner
    served polls again at once with its free slots. (Filling the first ones
    left the runners served long ago waiting with the one slot they had free
    then, too few for the next instant.)

    Work that fewer of the waiting slots fit is dealt first
    (`scarcest_first`): otherwise work any runner takes filled the slots of
    the few runners with a rarer label, and the work only they take waited
    for one of their runs to end (bench/top_of_band.py: `eu` work claimed
    up to a second after its instant at a burst).
    """
    turn = collections.deque(room)
    left = {waiter: want for waiter, (_, want) in room.items()}
    fits = {waiter: runner.fits for waiter, (runner, _) in room.items()}
    names = {waiter: runner.name for waiter, (runner, _) in room.items()}
    handed = {}
    found = candidates(fits, left, now, held, budget, names)
    for execution in scarcest_first(found, fits, left, names):
        job_labels = execution.job.requirements
        for _ in range(len(turn)):
            waiter = turn.popleft()
            pinned = execution.pinned_to
            if job_labels <= fits[waiter] and pinned in ("", names[waiter]):
                handed.setdefault(waiter, []).append(execution)
                left[waiter] -= 1
                if left[waiter]:
                    turn.append(waiter)
                break
            turn.append(waiter)
    return {waiter: sorted(got, key=claim_order) for waiter, got in handed.items()}


def scarcest_first(
    executions: list[Execution],
    fits: dict[Any, frozenset[str]],
    left: dict[Any, int],
    names: dict[Any, str],
) -> list[Execution]:
    """`executions` by how many of the waiting slots fit them (fewest first),
    oldest first among equals."""
    slots = {}  # {(job labels, pinned runner): waiting slots that fit}

    def fitting_slots(execution):
        key = (execution.job.requirements, execution.pinned_to)
        if key not in slots:
            labels, pinned = key
            slots[key] = sum(
                left[waiter]
                for waiter, carried in fits.items()
                if labels <= carried and pinned in ("", names[waiter])
            )
        return slots[key]

    return sorted(
        executions, key=lambda execution: (fitting_slots(execution), claim_order(execution))
    )


def candidates(
    fits: dict[Any, frozenset[str]],
    left: dict[Any, int],
    now: datetime,
    held: Held = None,
    budget: groups.Budget | None = None,
    names: dict[Any, str] | None = None,
) -> list[Execution]:
    """The ready executions the waiters can run, oldest first: for each
    distinct set of runner labels (in the order of its longest-waiting
    poll), the oldest that fit it, as many as those polls have room for.

    Each set claims with its own labels, not with the union of all of them:
    old work that only the union fits (labels no single runner carries)
    would fill the claim and hold back newer work a runner can take. And
    each takes the work no other waiting set fits before the work others
    fit too, whatever their age: older work any runner takes would fill
    its room and leave the work only it takes for a later poll.
    """
    room, pins = {}, {}
    for waiter, labels in fits.items():
        room[labels] = room.get(labels, 0) + left[waiter]
        pins.setdefault(labels, set()).add((names or {}).get(waiter))
    chosen = {}
    for labels, want in room.items():
        mine = sorted(name for name in pins[labels] if name)
        others = [other for other in room if other != labels]
        found = claimable(
            labels, want, now, chosen, held=held, budget=budget, names=mine, others=others
        )
        for execution in found:
            chosen[execution.pk] = execution
    return sorted(chosen.values(), key=claim_order)


def claim_order(execution: Execution) -> tuple[Any, ...]:
    return tuple(getattr(execution, field) for field in CLAIM_ORDER)
