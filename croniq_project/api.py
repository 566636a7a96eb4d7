"""The single NinjaAPI; each app contributes a Router (STYLE.md, "Layout")."""

from ninja import NinjaAPI

api = NinjaAPI(title="Croniq", version="1", urls_namespace="api")


def add_app_routers():
    """Routers are added lazily so apps can import this module freely."""
    from runners.api import executions_router, runners_router

    api.add_router("/v1/runners/", runners_router)
    api.add_router("/v1/executions/", executions_router)


add_app_routers()
