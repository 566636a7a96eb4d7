from django.urls import path

from dashboard import bulk_views, check_views, dead_letter_views, views

app_name = "dashboard"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("jobs/<slug:name>/", views.job_detail, name="job"),
    path("executions/<int:pk>/", views.execution_detail, name="execution"),
    path("executions/<int:pk>/log", views.execution_log, name="execution-log"),
    path("runners/", views.runners, name="runners"),
    path("runners/rows", views.runner_rows, name="runners-rows"),
    path("capacity/", views.capacity, name="capacity"),
    path("audit/", views.audit, name="audit"),
    path("alerts/", views.alerts, name="alerts"),
    path("dead-letters/", dead_letter_views.dead_letters, name="dead-letters"),
    path("checks/", check_views.checks, name="checks"),
    path("checks/<slug:name>/", check_views.check_detail, name="check"),
    # The keyboard palette's entries (JSON).
    path("palette", views.palette, name="palette"),
    # Operator actions (POST only, each behind its own permission).
    path("jobs/<slug:name>/run", views.run_job, name="job-run"),
    path("jobs/<slug:name>/pause", views.pause_job, name="job-pause"),
    path("jobs/<slug:name>/resume", views.resume_job, name="job-resume"),
    # Pause, resume or run many jobs: a confirmation, then the action.
    path("bulk/jobs", bulk_views.bulk_jobs, name="jobs-bulk"),
    path("executions/<int:pk>/cancel", views.cancel_execution, name="execution-cancel"),
    path("executions/<int:pk>/retry", views.retry_execution, name="execution-retry"),
    path("runners/<int:pk>/drain", views.drain_runner, name="runner-drain"),
    path("runners/<int:pk>/resume", views.resume_runner, name="runner-resume"),
    path("runners/<int:pk>/forget", views.forget_runner, name="runner-forget"),
    path(
        "dead-letters/<int:pk>/replay",
        dead_letter_views.replay_dead_letter,
        name="dead-letter-replay",
    ),
    path(
        "dead-letters/<int:pk>/discard",
        dead_letter_views.discard_dead_letter,
        name="dead-letter-discard",
    ),
    path(
        "dead-letters/discard",
        dead_letter_views.discard_dead_letters,
        name="dead-letters-discard",
    ),
]
