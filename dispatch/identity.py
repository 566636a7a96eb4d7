"""Who is calling: token authentication, registration, takeover and flapping.

A runner's `name` is its identity across restarts; its `session` says which
process currently speaks for it. A new session for a known name is a
takeover: the old session's work is released at once and its next call is
refused (docs/design.md §4, "Identity"). A name is bound to the token that first
registered it ("Credential binding").
"""

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, Value, When

import audit
from audit.models import AuditEvent
from dispatch import register_runs
from dispatch.notify import notify_new_work
from dispatch.refusals import Conflict, Forbidden, NotFound, Unauthorized
from runners.models import Runner, RunnerToken
from scheduler.models import Execution
from scheduler.runs import events, lifecycle

# last_used_at is informational: write it at most this often per token.
TOKEN_TOUCH_INTERVAL = timedelta(seconds=60)
# A runner's last_seen_at is written at most this often (see `touch`).
SEEN_INTERVAL = timedelta(seconds=1)

TAKEOVER = "runner.takeover"


def authenticate(secret: str, now: datetime) -> RunnerToken | None:
    """The active RunnerToken for `secret`, or None; touches last_used_at cheaply."""
    token = RunnerToken.objects.authenticate(secret)
    if token is not None:
        note_use(token, now)
    return token


def note_use(token: RunnerToken, now: datetime) -> None:
    if token.last_used_at is None or now - token.last_used_at >= TOKEN_TOUCH_INTERVAL:
        RunnerToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now


class Credential:
    """A well-formed bearer secret, checked against the database later, in the
    same database step as the call it authorises (one step per request)."""

    def __init__(self, secret: str) -> None:
        self.secret = secret


def require_token(credential: Credential, now: datetime) -> RunnerToken:
    """The token for `credential`; Unauthorized (401) when unknown or revoked."""
    token = authenticate(credential.secret, now)
    if token is None:
        raise Unauthorized("Unauthorized")
    return token


def register(
    token: RunnerToken,
    name: str,
    session: str,
    now: datetime,
    labels: Sequence[str] = (),
    version: str = "",
    hostname: str = "",
    capacity: int = 1,
    features: Sequence[str] = (),
) -> tuple[Runner, bool]:
    """Create or re-register the runner called `name`; returns (runner, takeover).

    A new session (a new agent process: a start, a restart, a takeover;
    not a re-registration of the same session) starts the runs of the jobs
    that run on register (`dispatch.register_runs`), in the same transaction.
    Raises Forbidden when the name is bound to another token.
    """
    try:
        runner, takeover = register_locked(
            token, name, session, now, labels, version, hostname, capacity, features
        )
    except BindingRefused as refusal:
        # Recorded after the rollback, so the audit row survives the refusal.
        refusal.record()
        raise
    if takeover:
        check_flapping(runner, now)
    return runner, takeover


@transaction.atomic
def register_locked(
    token: RunnerToken,
    name: str,
    session: str,
    now: datetime,
    labels: Sequence[str],
    version: str,
    hostname: str,
    capacity: int,
    features: Sequence[str] = (),
) -> tuple[Runner, bool]:
    runner = lock_or_create(token, name, session, now)
    if runner.token_id is None:
        runner.token = token
    elif runner.token_id != token.pk:
        raise BindingRefused(runner, token, now)
    takeover = bool(runner.session) and runner.session != session
    if takeover:
        take_over(runner, session, now)
    started = runner.session != session
    if started and runner.is_drained:
        end_drain(runner, now, actor=runner, why="new session")
    runner.session = session
    runner.labels = sorted(set(labels))
    runner.version = version or ""
    runner.hostname = hostname or ""
    runner.capacity = capacity
    runner.features = sorted(set(features))
    runner.last_seen_at = now
    if runner.state == Runner.OFFLINE:
        runner.state = runner.state_when_back
    runner.save()
    if started:
        register_runs.start(runner, now)
    return runner, takeover


def lock_or_create(token: RunnerToken, name: str, session: str, now: datetime) -> Runner:
    """The runner row for `name`, locked for this transaction (created if new)."""
    runner = Runner.objects.select_for_update().filter(name=name).first()
    if runner is not None:
        return runner
    try:
        with transaction.atomic():
            runner = Runner.objects.create(
                name=name, token=token, session="", registered_at=now, last_seen_at=now
            )
    except IntegrityError:
        # Another process registered the same name a moment ago.
        return Runner.objects.select_for_update().get(name=name)
    audit.record("runner.registered", target=runner, actor=runner, at=now)
    return runner


class BindingRefused(Forbidden):
    """Another token tries to use a name bound to its first token."""

    def __init__(self, runner: Runner, token: RunnerToken, now: datetime) -> None:
        super().__init__(f"runner name {runner.name!r} is bound to another token")
        self.runner, self.token, self.at = runner, token, now

    def record(self) -> None:
        audit.record(
            "runner.binding_refused",
            target=self.runner,
            actor=("runner", self.runner.name),
            at=self.at,
            data={"token": self.token.name, "bound_token_id": self.runner.token_id},
            counter=("croniq_runner_binding_refusals_total", {}),
        )


def take_over(runner: Runner, session: str, now: datetime) -> None:
    """Release what the old session held and record the takeover."""
    old_session = runner.session
    held = Execution.objects.filter(runner=runner, state=Execution.RUNNING).exclude(session=session)
    released = lifecycle.release(held, lifecycle.RUNNER_SUPERSEDED, now, actor=runner)
    runner.takeover_count += 1
    audit.record(
        TAKEOVER,
        target=runner,
        actor=runner,
        at=now,
        data={
            "old_session": old_session,
            "new_session": session,
            "released": [e.pk for e in released],
        },
        counter=("croniq_runner_takeovers_total", {"runner": runner.name}),
    )
    if released:
        transaction.on_commit(notify_retries)


def notify_retries() -> None:
    notify_new_work()


def recent_takeovers(runner: Runner, now: datetime) -> Any:
    since = now - timedelta(seconds=settings.CRONIQ_FLAP_WINDOW)
    return AuditEvent.objects.filter(
        action=TAKEOVER,
        at__gt=since,
        at__lte=now,
        target_type=Runner._meta.label_lower,
        target_id=str(runner.pk),
    )


def check_flapping(runner: Runner, now: datetime) -> bool:
    """Mark the runner flapping when takeovers exceed the threshold in the window,
    clear the mark after a quiet window. Returns the runner's flapping flag."""
    count = recent_takeovers(runner, now).count()
    if count > settings.CRONIQ_FLAP_THRESHOLD and not runner.flapping:
        updated = Runner.objects.filter(pk=runner.pk, flapping=False).update(
            flapping=True, flapping_since=now
        )
        runner.flapping, runner.flapping_since = True, now
        if updated:
            audit.record(
                "runner.flapping",
                target=runner,
                actor=runner,
                at=now,
                data={"takeovers": count, "window": settings.CRONIQ_FLAP_WINDOW},
                counter=("croniq_runner_flaps_total", {"runner": runner.name}),
            )
            events.emit(
                "runner.flapping",
                at=now,
                runner=runner,
                data={"takeovers": count, "window": settings.CRONIQ_FLAP_WINDOW},
            )
    elif count == 0 and runner.flapping:
        clear_flapping(runner, now)
    return runner.flapping


def clear_flapping(runner: Runner, now: datetime) -> None:
    updated = Runner.objects.filter(pk=runner.pk, flapping=True).update(
        flapping=False, flapping_since=None
    )
    runner.flapping, runner.flapping_since = False, None
    if updated:
        audit.record(
            "runner.flapping_cleared",
            target=runner,
            at=now,
            data={"quiet_for": settings.CRONIQ_FLAP_WINDOW},
        )


def clear_quiet_flapping(now: datetime) -> int:
    """Clear the flapping mark of every runner that had no takeover for a window.

    A runner that died while flapping never calls again, so a step of the
    loop calls this (`RunnersConfig.loop_steps`). Returns how many were cleared.
    """
    cleared = 0
    for runner in Runner.objects.filter(flapping=True):
        if not recent_takeovers(runner, now).exists():
            clear_flapping(runner, now)
            cleared += 1
    return cleared


def current_runner(token: RunnerToken, runner_id: int, session: str) -> Runner:
    """The runner `runner_id` if `token` may speak for it under `session`.

    404 unknown runner, 403 bound to another token, 409 superseded session
    (a takeover happened: the caller must register again).
    """
    runner = Runner.objects.filter(pk=runner_id).first() if is_db_id(runner_id) else None
    return check_caller(runner, token, runner_id, session)


def caller(
    credential: Credential, runner_id: int, session: str, now: datetime
) -> tuple[RunnerToken, Runner]:
    """(token, runner) for a call about runner `runner_id` under `session`.

    The runner and its token come in one query; only when the credential
    is not that runner's active token is it looked up on its own, so the
    refusal is the right one (401 before 404, 403 and 409).
    """
    secret_hash = RunnerToken.hash_of(credential.secret)
    runner = None
    if secret_hash is not None and is_db_id(runner_id):
        runner = next(iter(Runner.objects.select_related("token").filter(pk=runner_id)), None)
    token = runner.token if runner is not None else None
    if token is None or token.secret_hash != secret_hash or token.revoked_at is not None:
        token = require_token(credential, now)
    else:
        note_use(token, now)
    return token, check_caller(runner, token, runner_id, session)


def token_of_runner(credential: Credential, runner_id: int, now: datetime) -> RunnerToken:
    """The caller's token, for a call about runner `runner_id` whatever its
    session: 401, 404 or 403 as `caller` answers them. A superseded session
    is left to each execution's own checks (a report under its old lease
    is still answered)."""
    token = require_token(credential, now)
    runner = Runner.objects.filter(pk=runner_id).first() if is_db_id(runner_id) else None
    check_owner(runner, token, runner_id)
    return token


def check_caller(runner: Runner | None, token: RunnerToken, runner_id: int, session: str) -> Runner:
    check_owner(runner, token, runner_id)
    if runner.token_id is None or runner.session != session:
        raise Conflict(f"session superseded: runner {runner.name!r} registered again")
    return runner


def check_owner(runner: Runner | None, token: RunnerToken, runner_id: int) -> None:
    if runner is None:
        raise NotFound(f"unknown runner {runner_id}")
    if runner.token_id is not None and runner.token_id != token.pk:
        raise Forbidden(f"runner {runner.name!r} is bound to another token")


def touch(runner: Runner, now: datetime) -> None:
    """A call from the runner: it is alive (and online unless an operator drains it)."""
    touch_many([runner], now)


def touch_many(runners: Iterable[Runner], now: datetime) -> None:
    """`touch` for several runners, in at most two UPDATEs.

    A runner calls many times a second under load; `last_seen_at` only has
    to be fresh to the second (runners go offline after missing three
    heartbeats), so it is written at most once per `SEEN_INTERVAL`.
    """
    stale = [
        runner
        for runner in runners
        if runner.state == Runner.OFFLINE
        or runner.last_seen_at is None
        or abs(now - runner.last_seen_at) >= SEEN_INTERVAL
    ]
    if not stale:
        return
    Runner.objects.filter(pk__in=[r.pk for r in stale]).update(last_seen_at=now)
    back = [runner.pk for runner in stale if runner.state == Runner.OFFLINE]
    if back:
        come_back(Runner.objects.filter(pk__in=back))
    for runner in stale:
        runner.last_seen_at = now
        if runner.state == Runner.OFFLINE:
            runner.state = runner.state_when_back


def come_back(offline: Iterable[Runner]) -> None:
    """Offline runners heard from again: online, or draining again if an
    operator drained them (a drain outlives an offline spell)."""
    offline.filter(state=Runner.OFFLINE).update(
        state=Case(When(drained=True, then=Value(Runner.DRAINING)), default=Value(Runner.ONLINE))
    )


MAX_DB_ID = 2**63 - 1


def is_db_id(value: object) -> bool:
    return isinstance(value, int) and 0 < value <= MAX_DB_ID


# -- operator actions (admin) ----------------------------------------------


def drain(runner: Runner, now: datetime, actor: Any = None) -> bool:
    """Stop giving the runner new work; what it runs now may finish.

    The drain lasts until an operator resumes the runner or it starts
    afresh (registers a new session); an offline spell does not end it.
    """
    if runner.is_drained:
        return False
    # An offline runner stays offline (and drained) until it is heard from.
    state = Runner.OFFLINE if runner.state == Runner.OFFLINE else Runner.DRAINING
    Runner.objects.filter(pk=runner.pk).update(state=state, drained=True)
    runner.state, runner.drained = state, True
    audit.record("runner.drained", target=runner, actor=actor, at=now)
    return True


def resume(runner: Runner, now: datetime, actor: Any = None) -> bool:
    """Undo a drain: the runner gets work again."""
    if not runner.is_drained:
        return False
    end_drain(runner, now, actor=actor)
    return True


def end_drain(runner: Runner, now: datetime, actor: Any = None, why: str | None = None) -> None:
    state = Runner.OFFLINE if runner.state == Runner.OFFLINE else Runner.ONLINE
    Runner.objects.filter(pk=runner.pk).update(state=state, drained=False)
    runner.state, runner.drained = state, False
    data = {"reason": why} if why else None
    audit.record("runner.resumed", target=runner, actor=actor, at=now, data=data)


@transaction.atomic
def forget(runner: Runner, now: datetime, actor: Any = None) -> list[Execution]:
    """Release the runner's executions at once and delete it (and its token binding).

    If the machine comes back it registers as a new runner.
    """
    held = Execution.objects.filter(runner=runner, state=Execution.RUNNING)
    released = lifecycle.release(held, lifecycle.RUNNER_FORGOTTEN, now, actor=actor)
    audit.record(
        "runner.forgotten",
        target=runner,
        actor=actor,
        at=now,
        data={"released": [e.pk for e in released], "token": runner.token_id},
    )
    runner.delete()
    if released:
        transaction.on_commit(notify_retries)
    return released


def revoke(token: RunnerToken, now: datetime, actor: Any = None) -> bool:
    """Revoke a token: its calls get 401 and the names it bound are free again.

    Executions its runners hold are left to their leases: the agents stop
    them when renewals fail, before the reaper hands them out again.
    """
    if token.revoked_at is not None:
        return False
    with transaction.atomic():
        RunnerToken.objects.filter(pk=token.pk).update(revoked_at=now)
        token.revoked_at = now
        unbound = list(token.runners.values_list("name", flat=True))
        Runner.objects.filter(token=token).update(token=None)
        audit.record(
            "runnertoken.revoked", target=token, actor=actor, at=now, data={"unbound": unbound}
        )
    return True
