"""factory-boy factories with sensible defaults for the whole suite."""

import datetime as dt

import factory

from calendars.models import Calendar, CalendarPeriod
from runners.models import Runner, RunnerToken, hash_secret
from scheduler.models import Execution, Job

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


class CalendarFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Calendar

    name = factory.Sequence(lambda n: f"calendar-{n}")
    timezone = "UTC"


class CalendarPeriodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CalendarPeriod

    calendar = factory.SubFactory(CalendarFactory)
    kind = CalendarPeriod.EXCLUDE
    start_date = dt.date(2026, 12, 24)
    end_date = dt.date(2027, 1, 6)
    label = "freeze"


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    name = factory.Sequence(lambda n: f"job-{n}")
    schedule = "*/5 * * * *"
    timezone = "UTC"
    command = "true"
    next_run_at = T0


class ExecutionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Execution

    job = factory.SubFactory(JobFactory)
    scheduled_for = T0
    run_after = factory.SelfAttribute("scheduled_for")
    created_at = factory.SelfAttribute("scheduled_for")
    singleton = factory.SelfAttribute("job.singleton")


class RunnerTokenFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RunnerToken

    name = factory.Sequence(lambda n: f"token-{n}")
    secret_hash = factory.Sequence(lambda n: hash_secret(f"crq_test-secret-{n}"))


class RunnerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Runner

    name = factory.Sequence(lambda n: f"runner-{n}")
    token = factory.SubFactory(RunnerTokenFactory)
    session = factory.Sequence(lambda n: f"session-{n}")
    registered_at = T0
    last_seen_at = T0
