from django.apps import AppConfig


class CroniqProjectConfig(AppConfig):
    """The project as an app: its admin.py (allauth's models) and the audit
    of two-factor changes (croniq_project.sign_in)."""

    name = "croniq_project"

    def ready(self) -> None:
        from croniq_project import sign_in

        sign_in.audit_two_factor()
