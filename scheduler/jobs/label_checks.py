"""Warnings about jobs' labels from the apps that know the runners.

The scheduler imports nothing from the apps above it, so an app config with
a `label_warnings(jobs)` method ([(name, labels)] -> ["job x: ..."]; the
labels hold the marks of the features the job needs, `Job.requirements`)
contributes them, as `loop_steps` contributes loop steps. `manage.py apply`
prints them, `POST /api/v1/apply` answers them and the job admin shows them
after a save: a warning, never a refusal (the runner may simply not be
started yet).
"""

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.contrib import messages
from django.forms import ModelForm
from django.http import HttpRequest

from runners.models import JOB_FEATURES, feature_marks
from scheduler.jobs.models import needs_limits


def label_warnings(jobs: Iterable[tuple[str, list[str]]]) -> list[str]:
    jobs = list(jobs)
    found = []
    for config in apps.get_app_configs():
        check = getattr(config, "label_warnings", None)
        if check is not None and jobs:
            found += check(jobs)
    return found


def document_label_warnings(document: dict[str, Any]) -> list[str]:
    """The warnings of an applied apply document (its items are well
    formed): its jobs' labels, then what the apps say of their own
    sections (an app config's `apply_warnings(document)`)."""
    jobs = document.get("jobs") or []
    found = label_warnings((item["name"], requirements(item)) for item in jobs)
    for config in apps.get_app_configs():
        check = getattr(config, "apply_warnings", None)
        if check is not None:
            found += check(document)
    return found


def requirements(item: dict[str, Any]) -> list[str]:
    """What a runner must carry to take an apply item's job: its labels and
    the marks of the features it needs (`Job.requirements`)."""
    needed = [feature for feature in JOB_FEATURES if item.get(feature)]
    if needs_limits(item.get("max_memory"), item.get("max_cpu_seconds"), item.get("on_max_output")):
        needed.append("limits")
    return sorted({*(item.get("labels") or []), *feature_marks(needed)})


class WarnsOfUnservedLabels:
    """For the job admin: after a save, a warning when no runner ever
    registered carries the job's labels. (`save_related` runs after the
    save on adding and changing alike, and the job admin keeps its own
    `save_model`.)"""

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: list[Any], change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        job = form.instance
        for warning in label_warnings([(job.name, sorted(job.requirements))]):
            self.message_user(request, warning, messages.WARNING)
