from django.urls import path, re_path

from checks import views

app_name = "checks"

# healthchecks.io's URL scheme (docs/design.md §12): crontab lines keep
# working with a new base URL. The last part is a kind or an exit status.
urlpatterns = [
    path("<str:token>", views.ping, name="ping"),
    re_path(r"^(?P<token>[^/]+)/(?P<action>start|fail|log|[0-9]+)$", views.ping, name="action"),
]
