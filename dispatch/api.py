"""The runner HTTP protocol (docs/design.md §4, a contract).

Views stay thin: they read the clock once, hand the call to `identity`,
`polls` or `dispatch` in a database thread, and shape the answer. Errors are
raised as `dispatch.refusals.Refused` and mapped to `{"detail": ...}` once, in
`croniq_project.api`.
"""

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, NoReturn

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone
from ninja import Field, Router, Schema
from ninja.security import HttpBearer
from pydantic import ConfigDict, StrictBool, StrictInt, StrictStr

from core.db_threads import now_at_start, run_db
from core.text import Text
from dispatch import identity, polls
from dispatch import leases as dispatch
from dispatch.hub import stopping

INT32_MAX = 2**31 - 1
# Calls added to the protocol that an agent checks for before using them
# (older servers answer them 404): the batch finish.
FEATURES = ["finish-many"]


Session = Annotated[Text(1, 64), Field(description="Random id of the runner process.")]
Lease = Annotated[StrictInt, Field(ge=0, description="The lease token of the claim.")]
ExecutionId = Annotated[StrictInt, Field(description="An execution id.")]


SESSION_EXAMPLE = "3f6c1a9e-5b7d-4c2e-9a11-2b8e4f0d7c55"


def example(payload: dict[str, Any]) -> ConfigDict:
    """A request schema's config: its example in /api/docs."""
    return ConfigDict(json_schema_extra={"examples": [payload]})


class RunnerAuth(HttpBearer):
    """`Authorization: Bearer <runner token>`; 401 when missing, unknown or revoked.

    Here only the header's shape is checked; the token itself is looked up in
    the call's own database step (`as_runner`), so a request costs one trip
    to the database thread, not two.
    """

    async def __call__(self, request):
        scheme, _, secret = request.headers.get(self.header, "").partition(" ")
        secret = secret.strip()
        if scheme.lower() != self.openapi_scheme or not secret:
            return None
        return identity.Credential(secret)

    def authenticate(  # pragma: no cover - __call__ does it
        self, request: HttpRequest, token: str
    ) -> NoReturn:
        raise NotImplementedError


async def as_runner(request: HttpRequest, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run `fn(token, *args, now=now, **kwargs)` in one database step, `now`
    read when the step begins (`core.db_threads.now_at_start`)."""

    def step():
        now = timezone.now()
        token = identity.require_token(request.auth, now)
        return fn(token, *args, now=now, **kwargs)

    return await run_db(step)


runners_router = Router(tags=["runners"], auth=RunnerAuth())
executions_router = Router(tags=["executions"], auth=RunnerAuth())


class ErrorOut(Schema):
    detail: str


class ValidationErrorOut(Schema):
    detail: str
    errors: list[dict[str, Any]] = []


ERRORS = {
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    422: ValidationErrorOut,
    503: ErrorOut,
}


# -- register --------------------------------------------------------------


class RegisterIn(Schema):
    model_config = example(
        {
            "name": "build-01",
            "labels": ["linux", "docker"],
            "session": SESSION_EXAMPLE,
            "version": "0.9.0",
            "hostname": "build-01.example.com",
            "capacity": 2,
            "features": ["stdin", "run_as", "http", "container", "limits"],
        }
    )

    name: Annotated[Text(1, 200), Field(description="The runner's identity (default: hostname).")]
    labels: Annotated[list[Text(1, 100)], Field(max_length=100)] = []
    session: Session
    version: Text(0, 50) | None = None
    hostname: Text(0, 255) | None = None
    capacity: Annotated[StrictInt, Field(ge=1, le=1000)] = 1
    features: Annotated[
        list[Text(1, 50)],
        Field(
            max_length=50,
            description="Assignment fields this agent acts on (`stdin`, `run_as`, `http`, "
            "`container`, `limits`: max_memory, max_cpu_seconds, on_max_output): a job that "
            "sets one goes only to runners that announced it. Unknown names are kept and "
            "ignored. An addition: without it the runner gets no such job.",
        ),
    ] = []


class RegisterOut(Schema):
    runner_id: int
    session: str
    takeover: bool
    heartbeat_interval: float
    lease_ttl: float
    features: list[str] = Field(
        description="Additions to the protocol this server answers; an agent "
        "uses one only when it is listed."
    )


@runners_router.post("/register", response={200: RegisterOut, **ERRORS})
async def register(request: HttpRequest, body: RegisterIn) -> dict[str, Any]:
    """Register (or re-register) a runner; a new session for a known name is a takeover."""
    runner, takeover = await as_runner(
        request,
        identity.register,
        body.name,
        body.session,
        labels=body.labels,
        version=body.version,
        hostname=body.hostname,
        capacity=body.capacity,
        features=body.features,
    )
    return {
        "runner_id": runner.pk,
        "session": runner.session,
        "takeover": takeover,
        "heartbeat_interval": settings.CRONIQ_HEARTBEAT_INTERVAL,
        "lease_ttl": settings.CRONIQ_LEASE_TTL,
        "features": FEATURES,
    }


# -- poll ------------------------------------------------------------------


class PollIn(Schema):
    model_config = example({"session": SESSION_EXAMPLE, "wait": 30, "capacity": 1})

    session: Session
    wait: Annotated[
        float,
        Field(ge=0, le=60, strict=True, allow_inf_nan=False, description="Seconds to wait."),
    ] = 0
    capacity: Annotated[
        StrictInt | None, Field(ge=0, le=1000, description="How many executions to take.")
    ] = None
    slots: Annotated[
        StrictInt | None,
        Field(
            ge=1,
            le=1000,
            description="The runner's slots in all. While the poll waits, a slot that "
            "frees (a run of this runner finishes) is offered too: it takes up to "
            "`slots` less its runs still open on the server, and never less than "
            "`capacity`. Without it the poll takes `capacity`, whatever ends meanwhile.",
        ),
    ] = None
    early: Annotated[
        bool,
        Field(
            strict=True,
            description="Answer work claimed ahead of its instant at once, each "
            "assignment's `starts_in` saying when it may start (the runner prepares "
            "meanwhile). Without it the answer leaves at the instant.",
        ),
    ] = False


class AssignmentOut(Schema):
    id: int
    job: str
    command: str
    env: dict[str, Any]
    timeout: int | None
    scheduled_for: datetime
    attempt: int
    lease: int
    lease_expires_at: datetime
    # Seconds after the answer arrives before the run may start: 0 unless
    # the poll asked `early` and the work's instant is still ahead.
    starts_in: float = 0.0
    starts_at: str = Field(
        "",
        exclude_if=lambda instant: not instant,
        description="The instant `starts_in` counts to, ISO 8601 to the microsecond (sent "
        "to `early` polls only; the other times of an answer stop at the millisecond): a "
        "runner whose clock agrees with the server's within a few hundredths of a second "
        "starts the run at it, not `starts_in` after the answer arrived, which is late by "
        "the answer's way. An addition; agents that do not know it wait `starts_in`.",
    )
    trigger: str = Field(
        "schedule",
        description="How the run came about (schedule, manual, retry, catch_up, backfill, "
        "replay, chain, register, webhook): the agent sets CRONIQ_TRIGGER to it.",
    )
    # Sent only when the job sets them, so an assignment of any other job
    # stays as it always was; only runners that announced them get such work.
    stdin: str = Field(
        "",
        exclude_if=lambda stdin: not stdin,
        description="Text for the command's standard input (sent when the job has some).",
    )
    run_as: str = Field(
        "",
        exclude_if=lambda run_as: not run_as,
        description="The user to run the command as (sent when the job names one); "
        "a runner that cannot switch to it fails the run saying why.",
    )
    kind: str = Field(
        "shell",
        exclude_if=lambda kind: kind == "shell",
        description="What the run does (sent when it is not shell): http makes the request "
        "`http` describes, container runs the image `container` names with the machine's "
        "docker or podman, instead of running `command`. Only runners that announced `http` "
        "(`container`) get such work.",
    )
    http: dict[str, Any] = Field(
        default_factory=dict,
        exclude_if=lambda http: not http,
        description="The request of an http job (sent with kind http): method, url, headers, "
        "body, expect_status ([]: any 2xx), timeout (seconds or null), its secrets resolved.",
    )
    container: dict[str, Any] = Field(
        default_factory=dict,
        exclude_if=lambda container: not container,
        description="What a container job runs (sent with kind container): image, args, env "
        "(its secrets resolved), pull (missing, always or never), network (none, bridge, host "
        "or null: the engine's default).",
    )
    traceparent: str = Field(
        "",
        exclude_if=lambda traceparent: not traceparent,
        description="The run's W3C trace context (00-<trace id>-<span id>-01; sent when the "
        "execution has one): the agent sets the job's TRACEPARENT to it, and an http job's "
        "request carries it as its traceparent header unless the job sets one.",
    )
    # Limits (docs/design.md §15): max_output always, the others when the job
    # sets them (and then only runners that announced `limits` get the work).
    max_output: int | None = Field(
        None,
        exclude_if=lambda size: size is None,
        description="The bytes of output the run's log keeps: past them the agent keeps the "
        "head and the tail and says how much it cut (or, with on_max_output fail, ends the "
        "run and fails it). The server cuts a log there too.",
    )
    on_max_output: str = Field(
        "truncate",
        exclude_if=lambda policy: policy == "truncate",
        description="Output past max_output (sent when it is not truncate): fail ends the run "
        'and fails it, error "output limit 1 MiB exceeded".',
    )
    max_memory: int | None = Field(
        None,
        exclude_if=lambda size: size is None,
        description="Bytes of memory the command's processes may use together (sent when the "
        'job sets it): past them the run fails, error "memory limit 64 MiB exceeded".',
    )
    max_cpu_seconds: int | None = Field(
        None,
        exclude_if=lambda seconds: seconds is None,
        description="Seconds of CPU the command's processes may use together (sent when the "
        'job sets it): past them the run fails, error "CPU limit 2 s exceeded".',
    )
    redact: list[str] = Field(
        [],
        exclude_if=lambda redact: not redact,
        description="The values of the secrets the job's env, http request or container env "
        "names (sent when it names one): the agent masks each of 4 characters or more as *** "
        "in the output it sends.",
    )


class PollOut(Schema):
    executions: list[AssignmentOut]
    stopping: bool = Field(
        False,
        # Every other answer stays as it always was, byte for byte.
        exclude_if=lambda stopping: not stopping,
        description="Sent (true) only when this server is stopping: the poll was answered "
        "at once, with what was already claimed for it or nothing. Poll again at once: "
        "another server (or this one, restarted) answers. An addition; agents that do not "
        "know it poll again after any answer.",
    )


@runners_router.post("/{runner_id}/poll", response={200: PollOut, **ERRORS})
async def poll(request: HttpRequest, runner_id: int, body: PollIn) -> dict[str, Any]:
    """Claim work, waiting up to `wait` seconds for some (long-poll)."""
    handed = await polls.long_poll(
        request.auth, runner_id, body.session, body.wait, body.capacity, body.slots
    )
    unanswered = functools.partial(
        polls.return_unanswered, runner_id, body.session, handed.assignments
    )
    answered = functools.partial(polls.handed_over, handed)
    if body.early:
        # The runner waits for each instant itself: the answer leaves now.
        await polls.answer_not_before(request, None, unanswered, answered)
        return poll_answer(polls.with_starts_in(handed, timezone.now()))
    await polls.answer_not_before(request, handed.not_before, unanswered, answered)
    return poll_answer(handed.assignments)


def poll_answer(assignments: list[dict[str, Any]]) -> dict[str, Any]:
    """A poll's answer; while the process stops, saying so (`stopping`)."""
    if stopping():
        return {"executions": assignments, "stopping": True}
    return {"executions": assignments}


# -- heartbeat -------------------------------------------------------------


class HeldIn(Schema):
    id: ExecutionId
    lease: Lease


class HeartbeatIn(Schema):
    model_config = example({"session": SESSION_EXAMPLE, "executions": [{"id": 4711, "lease": 1}]})

    session: Session
    executions: Annotated[list[HeldIn], Field(max_length=1000)] = []


class HeartbeatOut(Schema):
    renewed: list[int]
    lost: list[int]
    cancel: list[int]
    lease_expires_at: datetime


@runners_router.post("/{runner_id}/heartbeat", response={200: HeartbeatOut, **ERRORS})
async def heartbeat(request: HttpRequest, runner_id: int, body: HeartbeatIn) -> dict[str, Any]:
    """Renew held leases; report lost and cancelled executions."""
    held = [(item.id, item.lease) for item in body.executions]
    return await run_db(
        now_at_start(dispatch.heartbeat, request.auth, runner_id, body.session, held)
    )


# -- hand-back -------------------------------------------------------------


class HandBackIn(Schema):
    model_config = example({"session": SESSION_EXAMPLE, "executions": [{"id": 4711, "lease": 1}]})

    session: Session
    executions: Annotated[list[HeldIn], Field(max_length=1000)]


class HandBackOut(Schema):
    handed_back: list[int]


@runners_router.post("/{runner_id}/hand-back", response={200: HandBackOut, **ERRORS})
async def hand_back(request: HttpRequest, runner_id: int, body: HandBackIn) -> dict[str, Any]:
    """Give back executions received but not started (e.g. while shutting
    down): pending again at once, the same attempt. Ones the session no
    longer holds under that lease are left alone and not listed."""
    held = [(item.id, item.lease) for item in body.executions]
    handed_back = await run_db(
        now_at_start(dispatch.hand_back_unstarted, request.auth, runner_id, body.session, held)
    )
    return {"handed_back": handed_back}


# -- logs and finish -------------------------------------------------------


class LogIn(Schema):
    model_config = example(
        {"session": SESSION_EXAMPLE, "lease": 1, "seq": 0, "data": "report: 120 rows\n"}
    )

    session: Session
    lease: Lease
    seq: Annotated[
        StrictInt, Field(ge=0, le=INT32_MAX, description="Chunk number; retries reuse it.")
    ]
    data: StrictStr


class LogOut(Schema):
    ok: bool


@executions_router.post("/{execution_id}/logs", response={200: LogOut, **ERRORS})
async def logs(request: HttpRequest, execution_id: int, body: LogIn) -> dict[str, bool]:
    """Append a log chunk (at most 64 KiB); a repeated `seq` is accepted once."""
    await as_runner(
        request,
        dispatch.append_log,
        execution_id,
        body.session,
        body.lease,
        body.seq,
        body.data,
    )
    return {"ok": True}


class Outcome(Schema):
    exit_code: Annotated[StrictInt | None, Field(ge=-INT32_MAX - 1, le=INT32_MAX)] = None
    error: StrictStr | None = ""
    timed_out: StrictBool = False


class FinishIn(Outcome):
    model_config = example(
        {"session": SESSION_EXAMPLE, "lease": 1, "exit_code": 0, "error": "", "timed_out": False}
    )

    session: Session
    lease: Lease


class FinishOut(Schema):
    state: str


@executions_router.post("/{execution_id}/finish", response={200: FinishOut, **ERRORS})
async def finish(request: HttpRequest, execution_id: int, body: FinishIn) -> dict[str, str]:
    """Report the outcome; answers the execution's final state."""
    state = await run_db(
        now_at_start(
            dispatch.finish,
            request.auth,
            execution_id,
            body.session,
            body.lease,
            body.exit_code,
            body.error,
            body.timed_out,
        )
    )
    return {"state": state}


# -- finish, several at once ----------------------------------------------


class ReportIn(Outcome):
    id: ExecutionId
    lease: Lease


class FinishManyIn(Schema):
    model_config = example(
        {
            "session": SESSION_EXAMPLE,
            "executions": [
                {"id": 4711, "lease": 1, "exit_code": 0},
                {"id": 4712, "lease": 3, "exit_code": 2, "error": "terminated by SIGTERM"},
            ],
        }
    )

    session: Session
    executions: Annotated[list[ReportIn], Field(min_length=1, max_length=1000)]


class ReportOut(Schema):
    id: int
    status: int = Field(
        description="What `POST /executions/{id}/finish` would have answered: 200, "
        "or the refusal's 404 or 409 (413 and 422 refuse the whole call)."
    )
    state: str | None = Field(None, description="The final state, when 200.")
    detail: str | None = Field(None, description="Why it was refused, when not 200.")


class FinishManyOut(Schema):
    executions: list[ReportOut]


@runners_router.post("/{runner_id}/finish", response={200: FinishManyOut, **ERRORS})
async def finish_many(request: HttpRequest, runner_id: int, body: FinishManyIn) -> dict[str, Any]:
    """Report the outcomes of several executions in one call, each answered
    on its own as its own `finish` would be (an addition to the protocol;
    the registration's `features` lists `finish-many`)."""
    reports = [
        (item.id, item.lease, item.exit_code, item.error, item.timed_out)
        for item in body.executions
    ]
    answers = await run_db(
        now_at_start(dispatch.finish_many, request.auth, runner_id, body.session, reports)
    )
    return {"executions": answers}
