"""The job form's live preview: what `scheduler.jobs.previews` counts, and the
admin view that answers it (staff only, 400 for bad input, never a 500)."""

from datetime import UTC, date, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.urls import reverse

from scheduler.jobs import previews
from scheduler.models import Job
from tests.admin_forms import job_form
from tests.factories import CalendarFactory, CalendarPeriodFactory, JobFactory

pytestmark = pytest.mark.django_db

# Thursday 26 March 2026, 13:00 in Berlin; summer time starts on Sunday the 29th.
NOW = datetime(2026, 3, 26, 12, 0, tzinfo=UTC)
PREVIEW = "admin:scheduler_job_preview"


def form(**fields):
    fields = {"schedule": "0 9 * * *", "timezone": "Europe/Berlin", **fields}
    return previews.read_form(fields)


def shown(answer, key="wall"):
    return [entry[key] for entry in answer["entries"]]


def freeze(start, end, label="spring freeze"):
    calendar = CalendarFactory(name="ops", timezone="Europe/Berlin")
    CalendarPeriodFactory(calendar=calendar, start_date=start, end_date=end, label=label)
    return calendar


# --- previews.py --------------------------------------------------------------


def test_fire_times_are_on_the_jobs_clock_with_utc_beside_across_dst():
    answer = previews.preview(previews.load_draft(form()), NOW)

    assert shown(answer)[:4] == [
        "2026-03-27 09:00:00 CET",
        "2026-03-28 09:00:00 CET",
        "2026-03-29 09:00:00 CEST",
        "2026-03-30 09:00:00 CEST",
    ]
    assert shown(answer, "utc")[:4] == [
        "08:00:00 UTC",
        "08:00:00 UTC",
        "07:00:00 UTC",
        "07:00:00 UTC",
    ]
    assert shown(answer, "at")[0] == "2026-03-27T08:00:00Z"
    assert len(answer["entries"]) == previews.SHOWN and answer["more"]


def test_a_blocked_candidate_is_listed_with_its_reason_and_the_loop_skips_it():
    calendar = freeze(date(2026, 3, 28), date(2026, 3, 29))
    answer = previews.preview(previews.load_draft(form(calendar=str(calendar.pk))), NOW)

    assert [(e["wall"][:10], e["blocked"]) for e in answer["entries"][:4]] == [
        ("2026-03-27", False),
        ("2026-03-28", True),  # the one candidate that met the freeze
        ("2026-03-30", False),
        ("2026-03-31", False),
    ]
    assert answer["entries"][1]["reason"] == "spring freeze (calendar ops): skipped"
    fires = [e["at"] for e in answer["entries"] if not e["blocked"]]
    draft = previews.load_draft(form(calendar=str(calendar.pk)))
    assert fires == [previews.iso(at) for at in draft.upcoming(NOW, previews.SHOWN)]


def test_a_deferred_candidate_says_it_runs_at_the_next_allowed_time():
    calendar = freeze(date(2026, 3, 28), date(2026, 3, 29))
    draft = previews.load_draft(form(calendar=str(calendar.pk), calendar_policy="defer"))
    entries = previews.preview(draft, NOW)["entries"]

    assert entries[1]["blocked"] and entries[1]["reason"].endswith(
        "deferred to the next allowed time"
    )
    assert entries[2]["wall"] == "2026-03-30 00:00:00 CEST"  # the end of the freeze


def test_show_more_reaches_past_a_freeze_weeks_ahead():
    # Every 30 minutes: the ten next fire times end this afternoon, the freeze
    # starts in a week. "Show more" lists enough to cross it.
    calendar = freeze(date(2026, 4, 2), date(2026, 4, 20), label="release freeze")
    draft = previews.load_draft(form(schedule="*/30 * * * *", calendar=str(calendar.pk)))

    first = previews.preview(draft, NOW)
    assert not any(e["blocked"] for e in first["entries"]) and first["more"]

    more = previews.preview(draft, NOW, more=True)
    blocked = [e for e in more["entries"] if e["blocked"]]
    assert [e["wall"] for e in blocked] == ["2026-04-02 00:00:00 CEST"]
    assert blocked[0]["reason"] == "release freeze (calendar ops): skipped"
    after = more["entries"][more["entries"].index(blocked[0]) + 1]
    assert after["wall"] == "2026-04-21 00:00:00 CEST"
    assert not more["more"]


def test_show_more_covers_three_months_of_a_rare_job_and_fifty_of_a_frequent_one():
    monthly = previews.preview(previews.load_draft(form(schedule="@monthly")), NOW, more=True)
    assert len(monthly["entries"]) == previews.MORE_SHOWN
    hourly = previews.preview(previews.load_draft(form(schedule="@hourly")), NOW, more=True)
    assert len(hourly["entries"]) == previews.MORE_CAP  # three months would be 2,200


def test_a_job_that_never_fires_says_why():
    calendar = CalendarFactory(name="never", weekdays=[])
    answer = previews.preview(previews.load_draft(form(calendar=str(calendar.pk))), NOW)
    assert "allows no time" in answer["reason"]
    # Only the candidate that met the calendar, and why.
    assert [(e["blocked"], e["reason"]) for e in answer["entries"]] == [
        (True, "not an allowed weekday (calendar never): skipped")
    ]


def test_a_business_day_job_lists_the_months_it_has_no_occurrence_in():
    # Allowed: January, two days of February and March 2027; the 3rd day counts.
    calendar = CalendarFactory(name="sparse", timezone="Europe/Berlin")
    for start, end in [((1, 1), (1, 31)), ((2, 10), (2, 11)), ((3, 1), (3, 31))]:
        CalendarPeriodFactory(
            calendar=calendar,
            kind="include",
            start_date=date(2027, *start),
            end_date=date(2027, *end),
        )
    draft = previews.load_draft(form(schedule="@business_day 3 09:00", calendar=str(calendar.pk)))
    answer = previews.preview(draft, datetime(2027, 1, 1, tzinfo=UTC))

    assert [(e["wall"], e["blocked"]) for e in answer["entries"]] == [
        ("2027-01-03 09:00:00 CET", False),
        ("February 2027", True),
        ("2027-03-03 09:00:00 CET", False),
    ]
    skipped = answer["entries"][1]
    assert skipped["skipped"] and skipped["at"] == "2027-01-31T23:00:00Z"
    assert skipped["reason"] == (
        "no occurrence in February 2027: calendar 'sparse' allows 2 days that month, fewer than 3"
    )


def test_a_business_day_job_is_counted_on_monday_to_friday_without_a_calendar():
    draft = previews.load_draft(form(schedule="@business_day 23 09:00", timezone="UTC"))
    answer = previews.preview(draft, datetime(2026, 6, 1, tzinfo=UTC))
    walls = [e["wall"] for e in answer["entries"]]
    assert walls[:3] == ["June 2026", "2026-07-31 09:00:00 UTC", "August 2026"]
    assert answer["entries"][0]["reason"] == (
        "no occurrence in June 2026: Monday to Friday gives 22 days that month, fewer than 23"
    )


def test_an_unchanged_every_job_keeps_its_grid_and_a_changed_one_counts_from_the_save():
    poll = JobFactory(
        schedule="@every 10m", timezone="UTC", next_run_at=NOW + timedelta(seconds=33)
    )
    same = form(schedule="@every 10m", timezone="UTC", job=str(poll.pk))
    edited = form(schedule="@every 15m", timezone="UTC", job=str(poll.pk))

    kept = previews.preview(previews.load_draft(same), NOW)
    assert shown(kept, "at")[:2] == ["2026-03-26T12:00:33Z", "2026-03-26T12:10:33Z"]
    assert kept["anchor"].startswith("counted on the grid of the next run")
    moved = previews.preview(previews.load_draft(edited), NOW)
    assert shown(moved, "at")[:2] == ["2026-03-26T12:15:00Z", "2026-03-26T12:30:00Z"]
    assert moved["anchor"] == "counted from the moment the job is saved"


def test_a_weekday_range_ending_on_sunday_previews_the_weekend():
    answer = previews.preview(previews.load_draft(form(schedule="0 9 * * sat-sun")), NOW)
    assert shown(answer)[:3] == [
        "2026-03-28 09:00:00 CET",
        "2026-03-29 09:00:00 CEST",
        "2026-04-04 09:00:00 CEST",
    ]


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"schedule": "61 * * * *"}, "minute field: 61 is out of range 0-59"),
        ({"schedule": "0 9 * * fri-mon"}, "day-of-week field: range fri-mon runs backwards"),
        ({"schedule": ""}, "it has no schedule: it runs when a runner starts"),
        ({"schedule": "@every 0s"}, "longer than zero"),
        ({"timezone": "Mars/Olympus"}, "'Mars/Olympus' is not a known IANA timezone"),
        ({"timezone": ""}, "'' is not a known IANA timezone"),
        ({"calendar": "999999"}, "unknown calendar 999999"),
        ({"calendar": "ops"}, "calendar id 'ops' is not a number"),
        ({"job": "999999"}, "unknown job 999999"),
        ({"calendar_policy": "later"}, "unknown calendar policy 'later'"),
    ],
)
def test_bad_input_is_a_preview_error(fields, message):
    with pytest.raises(previews.PreviewError, match=message):
        previews.load_draft(form(**fields))


# --- the admin view -------------------------------------------------------------


@pytest.fixture
def staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("ops", "ops@example.com", "pw"))
    return client


def staff_with(client, django_user_model, *codenames, is_staff=True):
    user = django_user_model.objects.create_user("viewer", "v@example.com", "pw", is_staff=is_staff)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def test_the_view_answers_fire_times_and_blocked_reasons(staff):
    calendar = freeze(date(2026, 3, 28), date(2026, 3, 29))
    query = {"schedule": "0 9 * * *", "timezone": "Europe/Berlin", "calendar": calendar.pk}
    with time_machine.travel(NOW, tick=False):
        answer = staff.get(reverse(PREVIEW), query)

    assert answer.status_code == 200
    entries = answer.json()["entries"]
    assert entries[0]["wall"] == "2026-03-27 09:00:00 CET"
    assert entries[1]["reason"] == "spring freeze (calendar ops): skipped"


@pytest.mark.parametrize(
    "query, message",
    [
        ({"schedule": "* * *"}, "has 3 fields; cron needs 5"),
        ({"schedule": "@business_day 0 09:00"}, "day number 0 does not exist"),
        ({"schedule": "@daily", "timezone": "Nowhere/City"}, "not a known IANA timezone"),
        ({"schedule": "@daily", "calendar": "424242"}, "unknown calendar 424242"),
    ],
)
def test_bad_input_answers_400_with_a_message(staff, query, message):
    answer = staff.get(reverse(PREVIEW), query)
    assert answer.status_code == 400
    assert message in answer.json()["error"]


def test_anonymous_and_non_staff_are_sent_to_the_login_page(client, django_user_model):
    answer = client.get(reverse(PREVIEW), {"schedule": "@daily"})
    assert answer.status_code == 302 and "/login/" in answer["Location"]
    staff_with(client, django_user_model, "view_job", is_staff=False)
    answer = client.get(reverse(PREVIEW), {"schedule": "@daily"})
    assert answer.status_code == 302 and "/login/" in answer["Location"]


def test_staff_who_may_not_see_jobs_are_refused(client, django_user_model):
    staff_with(client, django_user_model, "view_calendar")
    answer = client.get(reverse(PREVIEW), {"schedule": "@daily"})
    assert answer.status_code == 403
    assert "entries" not in answer.json()


def test_staff_who_may_view_jobs_get_previews(client, django_user_model):
    job = JobFactory(schedule="@daily")
    staff_with(client, django_user_model, "view_job")
    query = {"schedule": "@daily", "timezone": "UTC", "job": job.pk}
    answer = client.get(reverse(PREVIEW), query)
    assert answer.status_code == 200 and answer.json()["entries"]


def test_the_job_form_loads_the_preview_script_with_its_url_and_job(staff):
    job = JobFactory()
    page = staff.get(reverse("admin:scheduler_job_change", args=[job.pk])).content.decode()
    assert "scheduler/fire_preview.js" in page
    assert f'data-preview-url="{reverse(PREVIEW)}"' in page
    assert f'data-job-id="{job.pk}"' in page
    add = staff.get(reverse("admin:scheduler_job_add")).content.decode()
    assert 'data-job-id=""' in add


def test_a_preview_says_what_the_save_then_schedules(staff):
    with time_machine.travel(NOW, tick=False):
        preview = staff.get(reverse(PREVIEW), {"schedule": "@every 10m", "timezone": "UTC"})
        staff.post(
            reverse("admin:scheduler_job_add"), job_form(schedule="@every 10m", timezone="UTC")
        )
    saved = Job.objects.get(name="report")
    assert preview.json()["entries"][0]["at"] == previews.iso(saved.next_run_at)


def test_a_job_paused_until_an_instant_previews_from_its_end_even_when_edited():
    until = NOW + timedelta(days=2)
    job = JobFactory(schedule="@every 10m", timezone="UTC", paused_at=NOW, paused_until=until)
    edited = form(schedule="@every 15m", timezone="UTC", job=str(job.pk))

    answer = previews.preview(previews.load_draft(edited), NOW)

    assert shown(answer, "at")[0] == previews.iso(until + timedelta(minutes=15))


def test_an_interval_too_long_to_count_is_a_400_not_a_500(staff):
    answer = staff.get(reverse(PREVIEW), {"schedule": "@every 99999999999d"})
    assert answer.status_code == 400
    assert "at most 36500d" in answer.json()["error"]
