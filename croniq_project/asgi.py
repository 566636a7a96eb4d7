import os
from typing import TYPE_CHECKING

from croniq_project.startup import web_application

if TYPE_CHECKING:  # imported once Django is set up
    from croniq_project.asgi_handler import CroniqASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")


def get_application() -> "CroniqASGIHandler":
    """Django's `get_asgi_application`, with Croniq's handler."""
    import django

    django.setup(set_prefix=False)
    from django.urls import get_resolver

    from core import tracing
    from croniq_project.asgi_handler import CroniqASGIHandler
    from notifications import stall_watch
    from scheduler.firing.long_lived import settle_the_collector, switch_threads_often

    tracing.require_extra()
    # The web processes outlive a dead scheduler loop: they report its stall.
    stall_watch.start()
    handler = CroniqASGIHandler()
    # The URL patterns (and the API's schemas they import) load on the first
    # request otherwise; with them loaded, what is alive now lives as long
    # as the process.
    get_resolver().url_patterns  # noqa: B018
    settle_the_collector()
    # The hub's claim, the polls' answers and the finishes take turns on
    # the interpreter: each query's return waited up to Python's default
    # 5 ms for a busy thread to let go, a dozen times in a hub step.
    switch_threads_often()
    return handler


application = web_application(get_application)
