from django.apps import AppConfig


class RunnersConfig(AppConfig):
    # The runners themselves: their rows and migrations, nothing else, so
    # that the scheduler (an execution names its runner) depends on no app
    # above it. What runners do over HTTP is the dispatch app's.
    name = "runners"
    verbose_name = "Runners"
