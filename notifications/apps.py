from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig

if TYPE_CHECKING:  # the loop and its steps import models: not before the apps are ready
    from scheduler.firing.loop import SchedulerLoop
    from scheduler.firing.steps import Step


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from notifications import checks  # noqa: F401 (registers the system checks)
        from notifications.applyitems import NotifySections
        from notifications.recording import record_event
        from scheduler.apply import document as applyfile
        from scheduler.runs import events

        # Events commit with the state change that causes them.
        events.on_event(record_event)
        # `channels:` and `notify:` in apply files, applied with the jobs.
        applyfile.add_sections(NotifySections.KEYS, NotifySections)

    def apply_warnings(self, document: dict[str, Any]) -> list[str]:
        """For `manage.py apply` and the API: channel secrets read from the
        environment of another process (scheduler.jobs.label_checks)."""
        from notifications.applyitems import environment_warnings

        return environment_warnings(document)

    def secret_reference_problem(self, reference: str) -> str | None:
        """For a job's `webhook_secret` (scheduler.jobs.webhooks): why it is
        no secret reference this process can read, as a channel's secret
        is checked, or None."""
        from notifications import secrets

        try:
            secrets.validate_reference(reference)
        except ValueError as error:
            return str(error)
        return None

    def before_executions_deleted(self, ids: list[int]) -> None:
        """For `scheduler.housekeeping.retention`: events about pruned executions keep
        their data and lose the link (SET_NULL, which the raw DELETE skips)."""
        from notifications.models import Event
        from scheduler.housekeeping import rows_by_id

        rows_by_id.clear_where(Event, "execution", ids)

    def loop_steps(self, loop: SchedulerLoop) -> list[Step]:
        from notifications import detectors, digests, incidents, notifier_process, retention
        from scheduler.firing.steps import HOUSEKEEPING_INTERVAL, IDLE_PRUNE_EVERY, Step

        return [
            # Routing and delivery run in the notifier's own process: its
            # step only starts it with the loop's first tick.
            notifier_process.loop_step(loop),
            Step(
                "incidents_closed", incidents.close_incidents, every=1.0, until=incidents.next_close
            ),
            # Events no state change causes, found by looking every few seconds.
            Step("slow", detectors.detect_slow, every=HOUSEKEEPING_INTERVAL),
            Step(
                "missed",
                detectors.detect_missed,
                every=HOUSEKEEPING_INTERVAL,
                until=detectors.next_missed_check,
            ),
            Step(
                "unserved",
                detectors.detect_unserved,
                every=HOUSEKEEPING_INTERVAL,
                until=detectors.next_unserved_check,
            ),
            Step("digests", digests.send_digests, every=30.0),
            Step(
                "notifications_pruned",
                retention.prune,
                every=HOUSEKEEPING_INTERVAL,
                idle_every=IDLE_PRUNE_EVERY,
            ),
        ]
