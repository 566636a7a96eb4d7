from django.apps import AppConfig


class RunnersConfig(AppConfig):
    name = "runners"
    verbose_name = "Runners"

    def ready(self):
        from runners.hub import wake_local_hubs
        from runners.notify import notify_new_work
        from scheduler.firing import notifier

        # New or retried executions wake this process's waiting polls, and
        # (PostgreSQL) every other web process's.
        notifier.on_new_work(wake_local_hubs)
        notifier.on_new_work(notify_new_work)

    def loop_steps(self, loop):
        from runners import identity, loop_steps
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

    def runners_for(self, labels):
        """For `scheduler.firing.fanout`: the runners a run-on-all job runs on now."""
        from runners import coverage

        return coverage.online_with(labels)

    def label_warnings(self, jobs):
        """For `scheduler.jobs.label_checks`: the jobs whose labels no runner carries."""
        from runners import coverage

        return coverage.label_warnings(jobs)
