from django.apps import AppConfig


class ProjectsConfig(AppConfig):
    name = "projects"
    verbose_name = "Projects and roles"
    default_auto_field = "django.db.models.BigAutoField"
