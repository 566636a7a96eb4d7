"""The management API's routers (docs/design.md §8), mounted at /api/v1/ beside
the runner protocol by `croniq_project.api`. Each call names its scope with
`auth=needs(...)` (control.auth)."""

from ninja import Router


def routers() -> list[tuple[str, Router]]:
    """[(prefix, Router)] of the management API, in mounting order."""
    from control import (
        apply_api,
        audit_api,
        calendars_api,
        checks_api,
        dead_letters_api,
        executions_api,
        forecast_api,
        jobs_api,
        keys_api,
        maintenance_api,
        runners_api,
        secrets_api,
        triggers_api,
        webhooks_api,
    )

    return [
        ("/v1/", jobs_api.router),
        ("/v1/", triggers_api.router),
        ("/v1/", calendars_api.router),
        ("/v1/", apply_api.router),
        ("/v1/", executions_api.router),
        ("/v1/", keys_api.router),
        ("/v1/", runners_api.router),
        ("/v1/", audit_api.router),
        ("/v1/", dead_letters_api.router),
        ("/v1/", maintenance_api.router),
        ("/v1/", forecast_api.router),
        ("/v1/", checks_api.router),
        ("/v1/", webhooks_api.router),
        ("/v1/", secrets_api.router),
    ]
