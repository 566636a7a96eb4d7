"""Checks with sensible defaults for the check-in tests."""

import factory

from checks.models import Check


class CheckFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Check

    name = factory.Sequence(lambda n: f"check-{n}")
    period = 3600
    grace = 300
