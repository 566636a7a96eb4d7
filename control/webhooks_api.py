"""A job's webhook URL (docs/design.md §14), `POST /api/v1/hooks/{token}`:
runs the job with no API key, and `POST /api/v1/jobs/{name}/webhook`, which
gives it a new URL. The token's making and checking are
scheduler.jobs.webhooks; a call runs the job as the trigger call does
(scheduler.firing.triggers), with trigger `webhook`.

Thought of as an attacker would:

- Guessing: a token is a 128-bit key with its HMAC under SECRET_KEY; one
  this server did not make is answered 404 before any query, exactly as a
  token whose job is gone, was regenerated or has its webhook off. No
  answer but 404 is given before the token is known good.
- A token of another job runs that job only: the key names the job, and
  the body cannot name one.
- Signature (with `webhook_secret`): checked over the raw body before the
  body is read for anything (401 otherwise), as §9's receivers check
  Croniq's own: `t` within 5 minutes, HMAC-SHA256 of "<t>.<body>".
  A replay within those minutes is a new run unless it carries the same
  `Idempotency-Key`, which answers the first run's id and runs nothing.
- Bodies: at most MAX_BODY bytes are read (the ASGI handler drops the rest;
  413); `{"env": {...}}` and nothing else, names limited to the job's
  `parameters` (422 naming the field, as the trigger call answers).
- Flooding a good URL: the job's pending queue is bounded as the trigger
  call's is (429 with Retry-After, CRONIQ_TRIGGER_QUEUE_LIMIT).
- A paused or disabled job runs when called, as the trigger call runs it:
  turning the webhook off or regenerating the URL is how a URL is stopped.
"""

import logging
import typing
from datetime import datetime

import pydantic
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from ninja import Router, Schema, Status
from ninja.errors import HttpError, ValidationError
from pydantic import ConfigDict

from audit.models import AuditEvent
from control import auth, jobs, refusals, scopes
from control.jobs_api import JobOut
from core.db_threads import run_db
from core.text import Text, no_nul_or_surrogates
from notifications import secrets, signatures
from scheduler.firing import triggers
from scheduler.jobs import webhooks
from scheduler.models import Execution, Job
from scheduler.runs import operations
from scheduler.runs.refusals import OperationRefused

router = Router(tags=["webhooks"])
log = logging.getLogger(__name__)

# The most of a webhook call's body that is read: `{"env": {...}}` needs
# far less, and a caller without a key must not make the server hold more.
MAX_BODY = 64 * 1024
MAX_IDEMPOTENCY_KEY = 200
# Who runs the job, in the audit trail: the webhook, not a person or key.
ACTOR = (AuditEvent.SYSTEM, "webhook")
NOT_FOUND = "no such webhook"
EXAMPLE = {"env": {"REPORT_DATE": "2026-11-30"}}


class WebhookIn(Schema):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [EXAMPLE]})

    env: dict[Text(1, 200), Text(0, 100_000)] | None = None


class WebhookOut(Schema):
    execution_id: int
    deduplicated: bool


class Call(typing.NamedTuple):
    """A webhook call as its database step needs it."""

    key: str
    body: bytes
    signature: str | None
    idempotency_key: str | None
    now: datetime


DOCUMENTED_CALL = {
    "parameters": [
        {
            "in": "header",
            "name": "Idempotency-Key",
            "required": False,
            "schema": {"type": "string", "maxLength": MAX_IDEMPOTENCY_KEY},
            "description": "The same key within 24 hours answers the first run and runs nothing.",
        },
        {
            "in": "header",
            "name": "Croniq-Signature",
            "required": False,
            "schema": {"type": "string"},
            "description": "Needed when the job has a webhook_secret: "
            "t=<unix seconds>,v1=<hex HMAC-SHA256 of the secret over '<t>.<raw body>'>.",
        },
    ],
    "requestBody": {
        "required": False,
        "content": {
            "application/json": {"schema": WebhookIn.model_json_schema(), "example": EXAMPLE}
        },
    },
}


@router.post(
    "hooks/{token}",
    auth=None,
    response={202: WebhookOut},
    summary="Run a job through its webhook URL (no API key: the URL is the secret)",
    openapi_extra=DOCUMENTED_CALL,
)
async def call_webhook(request: HttpRequest, token: str) -> Status | JsonResponse:
    key = webhooks.key_of(token)
    if key is None:
        raise HttpError(404, NOT_FOUND)
    body = request.body  # no more than MAX_BODY + 1 bytes (croniq_project.asgi_handler)
    if len(body) > MAX_BODY:
        raise HttpError(413, f"request body too large: at most {MAX_BODY} bytes")
    headers = request.headers
    call = Call(
        key, body, headers.get("Croniq-Signature"), headers.get("Idempotency-Key"), timezone.now()
    )
    try:
        done = await run_db(webhook_step, call)
    except OperationRefused as refusal:
        return refusals.response(refusal)
    return Status(202, {"execution_id": done.execution.pk, "deduplicated": done.deduplicated})


def webhook_step(call: Call) -> triggers.Triggered:
    """Run the job whose webhook key `call` holds, once its signature and
    body are checked; HttpError or OperationRefused say why not."""
    job = Job.objects.filter(webhook=True, webhook_key=call.key).first()
    if job is None:
        raise HttpError(404, NOT_FOUND)
    check_signature(job, call)
    env = parsed_env(call.body)
    key = checked_idempotency_key(call.idempotency_key)
    with transaction.atomic():
        # Regenerated or turned off since it was read: that URL is gone.
        job = Job.objects.select_for_update().filter(pk=job.pk, webhook_key=call.key).first()
        if job is None or not job.webhook:
            raise HttpError(404, NOT_FOUND)
        return triggers.trigger_locked(job, call.now, ACTOR, key, env, kind=Execution.WEBHOOK)


def check_signature(job: Job, call: Call) -> None:
    """401 unless the call is signed with the job's `webhook_secret` (when
    it has one); 503 when this server cannot read that secret."""
    if not job.webhook_secret:
        return
    try:
        secret = secrets.resolve(job.webhook_secret)
    except ValueError as error:
        log.warning("webhook of job %s: its secret cannot be read: %s", job.name, error)
        raise HttpError(503, "the webhook's secret cannot be read on this server") from None
    if not signatures.verify(secret, call.signature, call.body, call.now):
        raise HttpError(
            401,
            "Croniq-Signature missing or invalid: t=<unix seconds>,v1=<hex HMAC-SHA256 of "
            "the secret over '<t>.<raw body>'>, t within 5 minutes",
        )


def parsed_env(body: bytes) -> dict[str, str]:
    """The body's `env` (none: {}); 422 naming the field otherwise."""
    if not body.strip():
        return {}
    try:
        parsed = WebhookIn.model_validate_json(body)
    except pydantic.ValidationError as error:
        problems = error.errors(include_url=False, include_context=False, include_input=False)
        raise ValidationError(
            [{**problem, "loc": ("body", *problem["loc"])} for problem in problems]
        ) from None
    return parsed.env or {}


def checked_idempotency_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY:
        raise HttpError(422, f"Idempotency-Key: 1 to {MAX_IDEMPOTENCY_KEY} characters")
    try:
        return no_nul_or_surrogates(key)
    except ValueError as error:
        raise HttpError(422, f"Idempotency-Key: {error}") from None


@router.post(
    "jobs/{name}/webhook",
    auth=auth.needs(scopes.JOBS_WRITE),
    response=JobOut,
    summary="Give a job a new webhook URL (the old one answers 404 at once)",
)
def regenerate_webhook(request: HttpRequest, name: str) -> dict[str, typing.Any]:
    job = jobs.get(name, request.auth)
    actor = auth.actor(request.auth)
    if not operations.regenerate_webhooks(Job.objects.filter(pk=job.pk), timezone.now(), actor):
        raise HttpError(409, f"{name} has no webhook: set webhook: true first")
    return jobs.fields(jobs.get(name, request.auth), writer=True)
