import os

from django.core.asgi import get_asgi_application

from croniq_project.startup import fail_on_bad_configuration

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
application = fail_on_bad_configuration(get_asgi_application)
