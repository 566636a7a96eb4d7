from django.apps import AppConfig

# Audit retention needs no sub-second precision (as the scheduler's
# housekeeping, `scheduler.steps.HOUSEKEEPING_INTERVAL`).
PRUNE_EVERY = 5.0


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"

    def loop_steps(self, loop):
        """Pruning old events, a step of `scheduler_loop`: a plain
        (name, run, every) tuple, as audit sits below the scheduler."""
        import audit

        return [("audit_pruned", audit.prune, PRUNE_EVERY)]
