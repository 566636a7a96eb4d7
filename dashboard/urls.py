from django.urls import path

from dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("jobs/<slug:name>/", views.job_detail, name="job"),
    path("executions/<int:pk>/", views.execution_detail, name="execution"),
    path("executions/<int:pk>/log", views.execution_log, name="execution-log"),
    path("runners/", views.runners, name="runners"),
    path("audit/", views.audit, name="audit"),
]
