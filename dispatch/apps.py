from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:  # the loop and its steps import models: not before the apps are ready
    from scheduler.firing.loop import SchedulerLoop
    from scheduler.firing.steps import Step


class DispatchConfig(AppConfig):
    name = "dispatch"
    verbose_name = "Dispatch"

    def ready(self) -> None:
        from dispatch.hub import wake_local_hubs
        from dispatch.notify import notify_new_work
        from scheduler.firing import notifier

        # New or retried executions wake this process's waiting polls, and
        # (PostgreSQL) every other web process's.
        notifier.on_new_work(wake_local_hubs)
        notifier.on_new_work(notify_new_work)

    def loop_steps(self, loop: SchedulerLoop) -> list[Step]:
        from dispatch import identity, loop_steps
        from scheduler.firing.steps import HOUSEKEEPING_INTERVAL, Step

        return [
            Step("reaped", loop_steps.reap_expired_leases, until=loop_steps.next_lease_expiry),
            Step(
                "runners",
                loop_steps.update_runner_states,
                every=HOUSEKEEPING_INTERVAL,
                until=loop_steps.next_runner_change,
            ),
            Step("flapping", identity.clear_quiet_flapping, every=HOUSEKEEPING_INTERVAL),
        ]

    def runners_for(self, labels: Iterable[str] | None) -> list[str]:
        """For `scheduler.firing.fanout`: the runners a run-on-all job runs on now."""
        from dispatch import coverage

        return coverage.online_with(labels)

    def label_warnings(self, jobs: Iterable[tuple[str, list[str]]]) -> list[str]:
        """For `scheduler.jobs.label_checks`: the jobs whose labels no runner carries."""
        from dispatch import coverage

        return coverage.label_warnings(jobs)
