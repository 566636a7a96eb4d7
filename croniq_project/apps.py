from django.apps import AppConfig


class CroniqProjectConfig(AppConfig):
    """The project as an app: its admin.py (allauth's models) and the audit
    of two-factor changes (croniq_project.two_factor_audit), and single sign-on's
    system check (croniq_project.sso_settings)."""

    name = "croniq_project"

    def ready(self) -> None:
        from django.core import checks

        from croniq_project import sso_settings, two_factor_audit

        two_factor_audit.audit_two_factor()
        checks.register(sso_settings.incomplete, checks.Tags.security)
