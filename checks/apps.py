from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:  # the loop and its steps import models: not before the apps are ready
    from scheduler.firing.loop import SchedulerLoop
    from scheduler.firing.steps import Step


class ChecksConfig(AppConfig):
    name = "checks"
    verbose_name = "Check-ins"

    def ready(self) -> None:
        from checks.applyitems import CheckSections
        from scheduler.apply.sections import add_sections

        # `checks:` in apply files, applied with the jobs.
        add_sections(CheckSections.KEYS, CheckSections)

    def loop_steps(self, loop: SchedulerLoop) -> list[Step]:
        from checks import evaluation, retention
        from scheduler.firing.steps import HOUSEKEEPING_INTERVAL, IDLE_PRUNE_EVERY, Step

        return [
            # Late and down are told to people in minutes (grace defaults
            # to one): a look every second is precise enough, and a look
            # that finds nothing overdue is two index probes.
            Step("checks", evaluation.evaluate, every=1.0),
            Step(
                "check_pings_pruned",
                retention.prune,
                every=HOUSEKEEPING_INTERVAL,
                idle_every=IDLE_PRUNE_EVERY,
            ),
        ]

    def ping_tokens(self, names: list[str]) -> dict[str, str]:
        """The ping token of each check named, by name, for `import_crontab
        --checks --wrap` (the scheduler's command imports nothing of checks)."""
        from checks.models import Check

        return dict(Check.objects.filter(name__in=names).values_list("name", "token"))
