from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        from notifications.applyitems import NotifySections
        from notifications.recording import record_event
        from scheduler import applyfile, events

        # Events commit with the state change that causes them.
        events.on_event(record_event)
        # `channels:` and `notify:` in apply files, applied with the jobs.
        applyfile.add_sections(NotifySections.KEYS, NotifySections)

    def loop_steps(self, loop):
        from notifications import retention
        from scheduler.steps import HOUSEKEEPING_INTERVAL, Step

        return [
            Step("notifications_pruned", retention.prune, every=HOUSEKEEPING_INTERVAL),
        ]
