from django.contrib import admin
from django.urls import include, path

from core.favicon import favicon
from croniq_project.api import api
from croniq_project.health import healthz
from croniq_project.metrics import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("ping/", include("checks.urls")),
    path("api/", api.urls),
    path("", include("dashboard.urls")),
]
