"""`POST /api/v1/apply`: an apply document over HTTP, planned and applied by
the code behind `manage.py apply` (scheduler.apply.document), all or nothing and
audited; it needs both jobs:write and calendars:write (docs/design.md §8), and
notifications:write as well when the document has a `channels:` or
`notify:` section or its prune would delete a channel or rule: a channel
sends what it reads to the URL it names, so writing one is not a jobs
writer's business; and checks:write when it has a `checks:` section or its
prune would delete a check, as the checks API asks. A dry run needs the
same (its checks tell whether a secret is set). `manage.py apply` runs as
the server's operator and needs no scope.

The body is JSON, or YAML when its Content-Type says so
(`application/yaml`): the file an operator keeps, sent as it is (the
`croniq apply` CLI does), read by the YAML loader `manage.py apply` uses.

`source` names the file the document is, as `manage.py apply --source`
does: the jobs and calendars it writes are managed under that name, and
`prune` deletes only that name's. Without it the name is "api".

A key bound to a project applies only documents whose every item, and
every stored row they touch, is in its project (docs/design.md §11): apply
is told the projects the key may write (control.reach.writable) and refuses
any other document whole, naming the field; its prune stays in them. A
bound key's document without `project:` is its project's, as the API's
writes without a project are.
"""

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Schema
from ninja.errors import HttpError

from checks.applyitems import writes_checks
from control import auth, examples, reach, scopes
from control.models import ApiKey
from notifications.applyitems import writes_notifications
from scheduler.apply.document import ApplyError, apply, parse, plan, source_name
from scheduler.jobs.label_checks import document_label_warnings

router = Router(tags=["apply"])

DEFAULT_SOURCE = "api"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")

# The body is read by the view (JSON or YAML), so ninja is told its shape.
DOCUMENT_BODY = {
    "requestBody": {
        "required": True,
        "description": "The apply document (docs/design.md §5): JSON, or the YAML file as it is.",
        "content": {
            "application/json": {"schema": {"type": "object"}, "example": examples.APPLY_DOCUMENT},
            "application/yaml": {"schema": {"type": "string"}, "example": examples.APPLY_YAML},
        },
    }
}


class ChangeOut(Schema):
    action: str
    kind: str
    name: str
    diff: dict[str, Any]
    # A job whose schedule changed: its next fire times before and after.
    fires: dict[str, list[datetime | None]] | None = None


class ApplyOut(Schema):
    changes: list[ChangeOut]
    applied: bool
    # Jobs whose labels no runner carries, as `manage.py apply` warns: the
    # document is applied anyway (the runner may not be started yet).
    warnings: list[str] = []


def document_of(request: HttpRequest) -> Any:
    """The request's apply document, checked as `manage.py apply` checks a
    file's; ApplyError when it is not one."""
    syntax = "YAML" if request.content_type in YAML_TYPES else "JSON"
    if not request.body and syntax == "JSON":
        raise ApplyError("body: expected an apply document")
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApplyError("body: not UTF-8 text") from None
    return parse(text, syntax)


def in_keys_project(document: Any, key: ApiKey) -> Any:
    """`document`, its items put in the project `key` is bound to unless
    it names one (`project:`); as it is for a global key."""
    project = reach.bound(key)
    if project is None or not isinstance(document, dict) or "project" in document:
        return document
    return {**document, "project": project}


@router.post(
    "apply",
    response=ApplyOut,
    auth=auth.needs_all(scopes.JOBS_WRITE, scopes.CALENDARS_WRITE),
    openapi_extra=DOCUMENT_BODY,
)
def apply_document(
    request: HttpRequest,
    dry_run: bool = False,
    prune: bool = False,
    source: str = DEFAULT_SOURCE,
) -> dict[str, Any]:
    key = request.auth
    try:
        document = in_keys_project(document_of(request), key)
        managed_source = source_name(source)
        if writes_notifications(document, prune, f"api:{key.name}", managed_source):
            auth.require(key, scopes.NOTIFICATIONS_WRITE)
        if writes_checks(document, prune, f"api:{key.name}", managed_source):
            auth.require(key, scopes.CHECKS_WRITE)
        changes = apply(
            document,
            now=timezone.now(),
            prune=prune,
            dry_run=dry_run,
            actor=auth.actor(key),
            source=f"api:{key.name}",
            managed_source=managed_source,
            projects=reach.writable(key),
        )
    except ApplyError as e:
        raise HttpError(422, "; ".join(e.errors)) from None
    warnings = document_label_warnings(document)
    return {"changes": plan(changes), "applied": not dry_run, "warnings": warnings}
