from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"
    # What the notifier runs before each delivery round, in order: callables
    # taking `now`, as "module.function". A module not installed is skipped.
    before_delivery = [
        "notifications.routing.route_pending",
    ]

    def ready(self):
        from notifications.recording import record_event
        from scheduler import events

        # Events commit with the state change that causes them.
        events.on_event(record_event)

    def loop_steps(self, loop):
        from notifications import digests, incidents, notifier, retention
        from scheduler.steps import HOUSEKEEPING_INTERVAL, Step

        # Delivery runs in the notifier's own threads: its step only starts
        # them with the loop's first tick.
        return [
            notifier.loop_step(loop),
            Step("incidents_closed", incidents.close_incidents, every=1.0),
            Step("digests", digests.send_digests, every=30.0),
            Step("notifications_pruned", retention.prune, every=HOUSEKEEPING_INTERVAL),
        ]
