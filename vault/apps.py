from django.apps import AppConfig


class VaultConfig(AppConfig):
    """Secrets: encrypted values that jobs name as `${secret:NAME}`."""

    name = "vault"
    verbose_name = "Secrets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from vault import checks  # noqa: F401  (registers the system checks)
