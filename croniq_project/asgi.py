import os

from croniq_project.startup import web_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")


def get_application():
    """Django's `get_asgi_application`, with Croniq's handler."""
    import django

    django.setup(set_prefix=False)
    from croniq_project.asgi_handler import CroniqASGIHandler
    from notifications import stall_watch

    # The web processes outlive a dead scheduler loop: they report its stall.
    stall_watch.start()
    return CroniqASGIHandler()


application = web_application(get_application)
