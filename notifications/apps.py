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
        from notifications import detectors, retention
        from scheduler.steps import HOUSEKEEPING_INTERVAL, Step

        return [
            Step("notifications_pruned", retention.prune, every=HOUSEKEEPING_INTERVAL),
            # Events no state change causes, found by looking every few seconds.
            Step("slow", detectors.detect_slow, every=5.0),
            Step("missed", detectors.detect_missed, every=5.0),
            Step("unserved", detectors.detect_unserved, every=5.0),
        ]
