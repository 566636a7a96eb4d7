"""Snooze a rule, a job, or everything until a time, with a note; audited.

A mute with both a rule and a job silences that rule for that job only. An
ended mute is kept (its `until` moved to the moment it was lifted) so the
alerts page can show who silenced what and why.
"""

from datetime import datetime
from typing import Any

from django.db import transaction

import audit
from notifications.models import Mute


class InvalidMute(ValueError):
    """Bad input for a mute; `field` names the culprit."""

    def __init__(self, field, message) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@transaction.atomic
def mute(
    *, rule: Any = None, job: Any = None, until: datetime, note: str, actor: object, now: datetime
) -> Mute:
    """Silence `rule` and/or `job` (neither: everything) until `until`."""
    if until <= now:
        raise InvalidMute("until", "must be in the future")
    note = (note or "").strip()
    if not note:
        raise InvalidMute("note", "say why (it is what the next person on call reads)")
    created = Mute.objects.create(
        rule=rule,
        job=job,
        until=until,
        note=note,
        created_by=audit_name(actor),
        created_at=now,
    )
    audit.record("notification.muted", target=created, actor=actor, at=now, data=facts(created))
    return created


@transaction.atomic
def unmute(mute: Mute, actor: object, now: datetime) -> bool:
    """Lift `mute` now. False (and nothing recorded) when it had ended."""
    if not Mute.objects.filter(pk=mute.pk, until__gt=now).update(until=now):
        return False
    mute.until = now
    audit.record("notification.unmuted", target=mute, actor=actor, at=now, data=facts(mute))
    return True


def active_mutes(now: datetime) -> list[Mute]:
    return list(Mute.objects.filter(until__gt=now))


def covers(mute: Mute, rule: Any, job_id: int | None) -> bool:
    """Does `mute` silence notifications of `rule` about the job `job_id`?"""
    return (mute.rule_id is None or mute.rule_id == rule.pk) and (
        mute.job_id is None or mute.job_id == job_id
    )


def facts(mute: Mute) -> dict[str, Any]:
    return {
        "rule": mute.rule.name if mute.rule else None,
        "job": mute.job.name if mute.job else None,
        "until": mute.until.isoformat(),
        "note": mute.note,
    }


def audit_name(actor: object) -> str:
    if actor is None:
        return ""
    if isinstance(actor, tuple):  # audit's (kind, name)
        return actor[1][:150]
    if hasattr(actor, "get_username"):
        return actor.get_username()
    return str(actor)[:150]
