from django.apps import AppConfig


class ControlConfig(AppConfig):
    """The management API (docs/design.md §8): API keys with scopes, and the calls
    that drive Croniq from outside the admin."""

    name = "control"
    verbose_name = "Management API"
    default_auto_field = "django.db.models.BigAutoField"
