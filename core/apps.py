from django.apps import AppConfig


class CoreConfig(AppConfig):
    # An app so that the admin kit's templates and static files are found;
    # it has no models of its own (abstract ones only).
    name = "core"
    verbose_name = "Croniq core"

    def ready(self) -> None:
        from core import tracing  # noqa: F401  (registers the system check croniq.E001)
