from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:  # the loop and its steps import models: not before the apps are ready
    from scheduler.firing.loop import SchedulerLoop
    from scheduler.firing.steps import Step


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduler"

    def ready(self) -> None:
        from calendars.changes import calendar_changed
        from scheduler.jobs import secret_checks  # noqa: F401  (registers the system check)
        from scheduler.jobs.calendar_changes import reschedule_jobs_of

        calendar_changed.connect(reschedule_jobs_of, dispatch_uid="scheduler.reschedule_jobs_of")

    def loop_steps(self, loop: SchedulerLoop) -> list[Step]:
        from scheduler.firing import ticks
        from scheduler.firing.steps import HOUSEKEEPING_INTERVAL, IDLE_PRUNE_EVERY, Step
        from scheduler.housekeeping import retention
        from scheduler.runs import operations, overlap, requirements

        return [
            Step("fired", loop.fire),
            Step("timed_out", ticks.expire_timeouts, until=ticks.next_timeout),
            Step("pauses_ended", operations.resume_ended_pauses, until=operations.next_pause_end),
            Step(
                "pruned",
                retention.prune_step,
                every=HOUSEKEEPING_INTERVAL,
                idle_every=IDLE_PRUNE_EVERY,
            ),
            Step("promoted", overlap.promote_waiting, every=HOUSEKEEPING_INTERVAL),
            # Waits for requirements that ended, and releases a success missed.
            Step("requirements", requirements.settle_waiting, every=HOUSEKEEPING_INTERVAL),
        ]
