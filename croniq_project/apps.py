from django.apps import AppConfig


class CroniqProjectConfig(AppConfig):
    """The project as an app: its admin.py (allauth's models) and the audit
    of two-factor changes (croniq_project.sign_in), and single sign-on's
    system check (croniq_project.sso_settings)."""

    name = "croniq_project"

    def ready(self) -> None:
        from django.core import checks

        from croniq_project import sign_in, sso_settings

        sign_in.audit_two_factor()
        checks.register(sso_settings.incomplete, checks.Tags.security)
