"""The admin's job form: tags, env rows and a timezone people can type,
refused in the words `manage.py apply` uses."""

import datetime as dt

import pytest
from django.urls import reverse
from django.utils.datastructures import MultiValueDict

from scheduler.admin.forms import JobAdminForm
from scheduler.apply.document import apply
from scheduler.apply.items import ApplyError
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 3, 2, 12, 0, tzinfo=dt.UTC)
NOT_JSON = "Enter a valid JSON"


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def posted(payload):
    """The form data a browser posts: a list is a field sent several times."""
    return MultiValueDict({k: v if isinstance(v, list) else [v] for k, v in payload.items()})


def form_of(**fields):
    form = JobAdminForm(data=posted(job_form(**fields)))
    form.is_valid()
    return form


def apply_says(field, value):
    """apply's error for a job whose `field` is `value`, without its "where"."""
    item = {"name": "report", "schedule": "30 2 * * *", "command": "true", field: value}
    with pytest.raises(ApplyError) as refused:
        apply({"jobs": [item]}, now=NOW, dry_run=True)
    [error] = refused.value.errors
    assert error.startswith(f"jobs[0].{field}: ")
    return error.removeprefix(f"jobs[0].{field}: ")


# -- labels and parameters: tags ----------------------------------------------


@pytest.mark.parametrize(
    ("typed", "labels"),
    [
        ("demo", ["demo"]),
        ("linux, gpu", ["linux", "gpu"]),
        ("linux,gpu,", ["linux", "gpu"]),
        ("", []),
        ('["linux", "gpu"]', ["linux", "gpu"]),  # the JSON the form took before
    ],
)
def test_labels_are_typed_as_tags(typed, labels):
    form = form_of(labels=typed)
    assert form.errors == {}
    assert form.cleaned_data["labels"] == labels


def test_a_bad_label_is_refused_as_apply_refuses_it():
    form = form_of(labels='["linux", ""]')
    assert form.errors["labels"] == [apply_says("labels", ["linux", ""])]
    assert form.errors["labels"] == ["expected a list of non-empty strings"]


def test_parameters_are_typed_as_tags():
    form = form_of(parameters="REPORT_DATE, REGION")
    assert form.errors == {}
    assert form.cleaned_data["parameters"] == ["REPORT_DATE", "REGION"]


@pytest.mark.parametrize("typed", ["CRONIQ_JOB", "REGION, REGION", "1st"])
def test_a_bad_parameter_is_refused_as_apply_refuses_it(typed):
    form = form_of(parameters=typed)
    names = [name.strip() for name in typed.split(",")]
    assert form.errors["parameters"] == [apply_says("parameters", names)]


def test_a_job_saved_with_tags_shows_them_again(staff):
    answer = staff.post(
        reverse("admin:scheduler_job_add"), job_form(labels="linux, gpu", parameters="REGION")
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(name="report")
    assert (job.labels, job.parameters) == (["linux", "gpu"], ["REGION"])
    page = staff.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert 'name="labels" value="linux, gpu"' in page
    assert "croniq/admin_widgets.js" in page


def test_typing_a_word_never_asks_for_json(staff):
    answer = staff.post(
        reverse("admin:scheduler_job_add"), job_form(labels="demo", parameters="bad name")
    )
    page = answer.content.decode()
    assert answer.status_code == 200
    assert NOT_JSON not in page
    assert "is not an environment variable name a trigger may set" in page


# -- schedule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("@business_day 0 09:00", "day number 0 does not exist"),
        ("@business_day 3 25:00", "time '25:00' is not a time of day"),
    ],
)
def test_a_bad_business_day_schedule_is_refused_as_apply_refuses_it(typed, says):
    form = form_of(schedule=typed)
    assert form.errors["schedule"] == [apply_says("schedule", typed)]
    assert says in form.errors["schedule"][0]


def test_a_business_day_schedule_is_saved_from_the_form(staff):
    answer = staff.post(
        reverse("admin:scheduler_job_add"), job_form(schedule="@business_day -1 18:00")
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(name="report")
    assert job.schedule == "@business_day -1 18:00" and job.next_run_at is not None
    listing = staff.get(reverse("admin:scheduler_job_changelist")).content.decode()
    assert "On the last business day of the month at 18:00" in listing


# -- env: rows of name and value --------------------------------------------------


def test_env_rows_become_the_jobs_environment():
    form = form_of(**{"env__name": ["REPORT_DIR", "", "LEVEL"], "env__value": ["/srv", "", "3"]})
    assert form.errors == {}
    assert form.cleaned_data["env"] == {"REPORT_DIR": "/srv", "LEVEL": "3"}


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ((["", "A"], ["x", "1"]), "row 1: a value needs a name"),
        ((["A", "A"], ["1", "2"]), "A is set twice"),
    ],
)
def test_env_rows_that_cannot_be_a_mapping_are_refused(rows, error):
    names, values = rows
    form = form_of(env__name=names, env__value=values)
    assert form.errors["env"] == [error]


def test_env_as_text_reads_json_or_name_value_lines():
    assert form_of(env='{"A": 1}').cleaned_data["env"] == {"A": "1"}  # apply's strings
    assert form_of(env="A=1\nB=x=y\n").cleaned_data["env"] == {"A": "1", "B": "x=y"}
    assert form_of(env="just words").errors["env"] == ["line 1: write NAME=value"]


def test_env_that_is_not_a_mapping_is_refused_as_apply_refuses_it():
    form = form_of(env='["A"]')
    assert form.errors["env"] == [apply_says("env", ["A"])]


def test_env_rows_round_trip_through_the_admin(staff):
    job = JobFactory(name="report", env={"REPORT_DIR": "/srv", "LEVEL": "3"})
    url = reverse("admin:scheduler_job_change", args=[job.pk])
    page = staff.get(url).content.decode()
    assert 'name="env__name" value="REPORT_DIR"' in page
    assert 'name="env__value" value="/srv"' in page
    assert page.count('name="env__name"') == 3  # two variables and a blank row

    rows = {"env__name": ["REPORT_DIR", "LEVEL", "NEW"], "env__value": ["/srv", "", "on"]}
    answer = staff.post(url, job_form(schedule=job.schedule, timezone="UTC", **rows))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job.refresh_from_db()
    assert job.env == {"REPORT_DIR": "/srv", "LEVEL": "", "NEW": "on"}


def test_env_and_labels_posted_as_stored_are_not_changed_fields():
    # The admin writes only the changed fields (JobAdmin.save_model).
    job = JobFactory(name="report", env={"A": "1"}, labels=["linux"])
    unchanged = {"env__name": ["A", ""], "env__value": ["1", ""], "labels": "linux"}
    form = JobAdminForm(data=posted(job_form(**unchanged)), instance=job)
    assert {"env", "labels"}.isdisjoint(form.changed_data)
    changed = {"env__name": ["A"], "env__value": ["2"], "labels": "linux, gpu"}
    form = JobAdminForm(data=posted(job_form(**changed)), instance=job)
    assert {"env", "labels"} <= set(form.changed_data)


# -- timezone: suggestions, checked by the validator apply uses --------------------


def test_a_known_timezone_is_taken():
    assert form_of(timezone="America/New_York").cleaned_data["timezone"] == "America/New_York"


def test_an_unknown_timezone_is_refused_as_apply_refuses_it():
    form = form_of(timezone="Mars/Olympus")
    assert form.errors["timezone"] == [apply_says("timezone", "Mars/Olympus")]


def test_the_timezone_input_suggests_the_iana_names(staff):
    page = staff.get(reverse("admin:scheduler_job_add")).content.decode()
    assert 'list="id_timezone_options"' in page
    assert '<datalist id="id_timezone_options">' in page
    assert '<option value="Europe/Berlin">' in page


def test_text_nested_too_deeply_for_json_is_an_error_not_a_crash():
    deep = "[" * 100_000
    assert form_of(labels=deep).cleaned_data["labels"] == [deep]  # one odd but valid label
    assert form_of(env="{" * 100_000).errors["env"] == ["line 1: write NAME=value"]
