"""The projects that exist, and what each holds, for the places rows are
written (apply, the API, the admin): a row may name only a project that
exists, and a project is deleted only once it holds nothing.

`default` always exists: every row made before projects belongs to it,
and a database emptied by hand (or a test's flush) must not strand them.
"""

from django.apps import apps
from django.db import models

from projects.models import DEFAULT, Project


def known() -> set[str]:
    return {DEFAULT, *Project.objects.values_list("name", flat=True)}


def exists(name: str) -> bool:
    return name == DEFAULT or Project.objects.filter(name=name).exists()


def held_models() -> list[type[models.Model]]:
    """Every model whose rows name their project (a `project` slug)."""
    return [
        model
        for model in apps.get_models()
        if any(f.name == "project" and isinstance(f, models.CharField) for f in model._meta.fields)
    ]


def holdings(name: str) -> dict[str, int]:
    """{model's verbose name plural: how many rows of it project `name` holds}."""
    counts = {}
    for model in held_models():
        count = model._default_manager.filter(project=name).count()
        if count:
            counts[str(model._meta.verbose_name_plural)] = count
    return counts
