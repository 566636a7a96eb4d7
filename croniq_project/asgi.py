import os

from django.core.asgi import get_asgi_application

from croniq_project.startup import web_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
application = web_application(get_asgi_application)
