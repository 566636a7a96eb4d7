from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        from notifications.recording import record_event
        from scheduler import events

        # Events commit with the state change that causes them.
        events.on_event(record_event)

    def loop_steps(self, loop):
        from notifications import digests, incidents, retention
        from scheduler.steps import HOUSEKEEPING_INTERVAL, Step

        return [
            Step("incidents_closed", incidents.close_incidents, every=1.0),
            Step("digests", digests.send_digests, every=30.0),
            Step("notifications_pruned", retention.prune, every=HOUSEKEEPING_INTERVAL),
        ]
