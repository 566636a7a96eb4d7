from typing import Any

from django.apps import AppConfig

# Audit retention needs no sub-second precision (as the scheduler's
# housekeeping, `scheduler.firing.steps.HOUSEKEEPING_INTERVAL`); after a pass that
# found nothing, the next comes a minute later (`IDLE_PRUNE_EVERY`).
PRUNE_EVERY = 5.0
IDLE_PRUNE_EVERY = 60.0


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def loop_steps(self, loop: Any) -> list[tuple[Any, ...]]:
        """Pruning old events, a step of `scheduler_loop`: a plain
        (name, run, every, until, idle_every) tuple, as audit sits below
        the scheduler."""
        import audit

        return [("audit_pruned", audit.prune, PRUNE_EVERY, None, IDLE_PRUNE_EVERY)]
