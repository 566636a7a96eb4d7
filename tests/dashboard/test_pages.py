import re
from datetime import UTC, datetime, timedelta

import time_machine
from django.urls import reverse

from calendars.models import Calendar
from dashboard import queries
from scheduler.housekeeping import retention
from scheduler.models import Execution
from tests.dashboard.conftest import NOW

# Session, user, the user's permissions (two queries, once a request), then
# the page's own reads: bounded whatever the table sizes.
# + the job filter counts, the jobs waiting for a runner, the failure heat-map
# Each page also reads whether a maintenance is in force (its banner).
# + the filter form's suggestions (kept a minute), and, to who may act on
# many jobs, how many jobs the filter matches.
# + the user's roles in the projects (once a request, for a user the global
# permissions do not answer for) and the projects, the project filter's choices.
OVERVIEW_QUERIES = 24
# + the run statistics: their counts and their durations; the user's roles
# (the buttons ask for the job's project).
JOB_QUERIES = 14
EXECUTION_QUERIES = 9
RUNNERS_QUERIES = 8
AUDIT_QUERIES = 7


def strip_links(html, job_name):
    row = html.split(f'data-job="{job_name}"')[1].split("</tr>")[0]
    return [int(pk) for pk in re.findall(r'href="/executions/(\d+)/"', row)]


def test_overview_shows_the_last_twenty_results_per_job_oldest_left(
    staff_client, make_job, make_history
):
    job = make_job("nightly-report")
    runs = make_history(job, 25)

    html = staff_client.get(reverse("dashboard:overview")).content.decode()

    assert strip_links(html, "nightly-report") == [r.pk for r in reversed(runs[:20])]
    assert 'class="cell state-succeeded"' in html
    # Run 3 (three minutes back) failed; its cell says so in UTC on hover.
    label = "failed · 2026-11-30 11:57:00 UTC"
    assert f'class="cell state-failed" href="/executions/{runs[3].pk}/"' in html
    assert f'title="{label}" aria-label="{label}"' in html


def test_overview_query_count_does_not_grow_with_jobs_or_history(
    staff_client, make_job, make_history, make_runner, django_assert_max_num_queries
):
    for i in range(queries.JOBS_PER_PAGE + 10):
        job = make_job(f"job-{i:03}")
        if i % 5 == 0:
            make_history(job, 22)
    make_runner()
    with django_assert_max_num_queries(OVERVIEW_QUERIES):
        answer = staff_client.get(reverse("dashboard:overview"))
    assert answer.status_code == 200
    assert len(answer.context["page"].items) == queries.JOBS_PER_PAGE


def test_the_overview_reads_its_heat_map_once_a_minute(
    staff_client, make_job, make_history, django_assert_max_num_queries
):
    make_history(make_job("nightly-report"), 5)
    url = reverse("dashboard:overview")

    def reads(at):
        with (
            time_machine.travel(at, tick=False),
            django_assert_max_num_queries(OVERVIEW_QUERIES) as counted,
        ):
            staff_client.get(url)
        return len(counted.captured_queries)

    first = reads(NOW)
    assert reads(NOW + timedelta(seconds=30)) < first  # the heat-map kept
    assert reads(NOW + timedelta(minutes=1)) == first  # read again


def test_the_job_page_reads_its_run_statistics_once_a_minute(
    staff_client, make_job, make_history, django_assert_max_num_queries
):
    job = make_job("nightly-report")
    make_history(job, 5)
    url = reverse("dashboard:job", args=[job.name])

    def reads(at):
        with (
            time_machine.travel(at, tick=False),
            django_assert_max_num_queries(JOB_QUERIES) as counted,
        ):
            staff_client.get(url)
        return len(counted.captured_queries)

    first = reads(NOW)
    assert reads(NOW + timedelta(seconds=30)) < first
    assert reads(NOW + timedelta(minutes=1)) == first


def test_overview_pages_through_jobs_by_name(staff_client, make_job):
    for i in range(queries.JOBS_PER_PAGE + 1):
        make_job(f"job-{i:03}")

    first = staff_client.get(reverse("dashboard:overview")).content.decode()
    second = staff_client.get(reverse("dashboard:overview"), {"page": 2}).content.decode()

    assert 'data-job="job-000"' in first
    assert f'data-job="job-{queries.JOBS_PER_PAGE:03}"' not in first
    assert 'rel="next" href="?page=2"' in first
    assert f'data-job="job-{queries.JOBS_PER_PAGE:03}"' in second
    assert 'data-job="job-000"' not in second


def test_overview_shows_live_counts_runners_online_and_scheduler_lag(
    staff_client, make_job, make_execution, make_runner
):
    job = make_job(next_run_at=NOW - timedelta(minutes=3))
    make_execution(job, NOW, state=Execution.PENDING)
    for name in ("a", "b"):
        make_runner(name, state="online")
    make_runner("c", state="offline", flapping=True, flapping_since=NOW)

    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:overview")).content.decode()

    def card(marker):
        return re.search(marker + r'.*?<div class="count">([^<]*)</div>', html, re.S).group(1)

    assert card('data-state="pending"') == "1"
    assert card('data-state="running"') == "0"
    assert card('data-metric="runners-online"') == "2"
    assert card('data-metric="runners-flapping"') == "1"
    assert card('data-metric="trigger-lag"') == "3.0 min"
    assert card('data-metric="dispatch-lag"') == "0 s"


def test_times_are_time_elements_in_utc_with_utc_on_hover(staff_client, make_job):
    job = make_job("nightly-report", last_scheduled_at=NOW)
    html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert (
        '<time datetime="2026-11-30T12:00:00Z" title="2026-11-30 12:00:00 UTC"'
        ' data-zone="viewer">2026-11-30 12:00:00 UTC</time>'
    ) in html


def test_overview_shows_the_next_run_on_the_jobs_clock_with_utc_beside(staff_client, make_job):
    make_job("berlin", schedule="0 13 * * *", timezone="Europe/Berlin", next_run_at=NOW)
    make_job("tokyo", schedule="30 0 * * *", timezone="Asia/Tokyo", next_run_at=NOW + H(3.5))
    make_job("utc", schedule="0 12 * * *", next_run_at=NOW)
    html = staff_client.get(reverse("dashboard:overview")).content.decode()

    assert next_run_cell(html, "berlin") == (
        '<time datetime="2026-11-30T12:00:00Z" data-job-zone="Europe/Berlin"'
        ' title="2026-11-30 12:00:00 UTC; shown in the job&#x27;s zone (Europe/Berlin)">'
        "2026-11-30 13:00:00 CET</time>"
        ' <span class="muted utc">(12:00:00 UTC)</span>'
    )
    # Another day in UTC: the UTC side keeps its date.
    assert ">2026-12-01 00:30:00 JST</time>" in next_run_cell(html, "tokyo")
    assert ">(2026-11-30 15:30:00 UTC)</span>" in next_run_cell(html, "tokyo")
    # A job in UTC shows it once.
    assert next_run_cell(html, "utc") == (
        '<time datetime="2026-11-30T12:00:00Z" data-job-zone="UTC"'
        ' title="2026-11-30 12:00:00 UTC; shown in the job&#x27;s zone (UTC)">'
        "2026-11-30 12:00:00 UTC</time>"
    )


def H(hours):
    return timedelta(hours=hours)


def next_run_cell(html, job_name):
    row = html.split(f'data-job="{job_name}"')[1].split("</tr>")[0]
    return re.findall(r"<td>(.*?)</td>", row, re.S)[2].strip()


def test_job_page_shows_history_newest_first_and_a_duration_chart(
    staff_client, make_job, make_history, django_assert_max_num_queries
):
    job = make_job("nightly-report")
    runs = make_history(job, queries.HISTORY_PER_PAGE + 3)

    with django_assert_max_num_queries(JOB_QUERIES):
        answer = staff_client.get(reverse("dashboard:job", args=[job.name]))
    html = answer.content.decode()

    history = answer.context["page"]
    assert [r.pk for r in history.items] == [r.pk for r in runs[: queries.HISTORY_PER_PAGE]]
    assert history.has_next
    assert html.count('class="point') == len(runs)
    assert "<svg" in html and 'class="point failed state-failed"' in html
    older = staff_client.get(reverse("dashboard:job", args=[job.name]), {"page": 2})
    assert [r.pk for r in older.context["page"].items] == [
        r.pk for r in runs[queries.HISTORY_PER_PAGE : 2 * queries.HISTORY_PER_PAGE]
    ]


def test_job_page_says_when_there_are_no_runs(staff_client, make_job):
    html = staff_client.get(reverse("dashboard:job", args=[make_job().name])).content.decode()
    assert "No finished runs yet." in html
    assert "No runs yet." in html


def test_unknown_job_or_execution_is_404(staff_client, db):
    assert staff_client.get(reverse("dashboard:job", args=["nope"])).status_code == 404
    assert staff_client.get(reverse("dashboard:execution", args=[999])).status_code == 404
    assert staff_client.get(reverse("dashboard:execution-log", args=[999])).status_code == 404


def next_fires(html):
    section = re.search(r"data-next-fires>(.*?)</(ol|p)>", html, re.S).group(1)
    return re.findall(r'<time datetime="([^"]+)"', section)


def test_job_page_lists_the_next_ten_fire_times_in_words(staff_client, make_job):
    job = make_job(schedule="0 * * * *")
    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert next_fires(html) == [f"2026-11-30T{h}:00:00Z" for h in range(13, 23)]
    assert "<span data-schedule-words>Every hour</span>" in html


def test_job_page_applies_the_jobs_calendar_to_fire_times(
    staff_client, make_job, django_assert_max_num_queries
):
    weekends = Calendar.objects.create(name="weekends", weekdays=["sat", "sun"])
    job = make_job(schedule="0 12 * * *", calendar=weekends)
    with time_machine.travel(NOW, tick=False), django_assert_max_num_queries(JOB_QUERIES):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    # 2026-11-30 is a Monday.
    assert next_fires(html)[:3] == [
        "2026-12-05T12:00:00Z",
        "2026-12-06T12:00:00Z",
        "2026-12-12T12:00:00Z",
    ]


def test_job_page_explains_a_schedule_that_never_meets_its_calendar(staff_client, make_job):
    weekends = Calendar.objects.create(name="weekends", weekdays=["sat", "sun"])
    job = make_job(schedule="0 12 * * 1-5", calendar=weekends)
    html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert next_fires(html) == []
    assert "never meets calendar" in html


def test_job_page_counts_every_schedules_from_the_jobs_next_run(staff_client, make_job):
    job = make_job(
        schedule="@every 30m",
        last_scheduled_at=NOW - timedelta(minutes=10, seconds=27),
        next_run_at=NOW + timedelta(minutes=19, seconds=33),
    )
    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert next_fires(html)[:2] == ["2026-11-30T12:19:33Z", "2026-11-30T12:49:33Z"]
    assert "Every 30 minutes" in html


def test_job_page_never_lists_past_instants_of_an_every_job(staff_client, make_job):
    # The loop has been down for an hour: the job is overdue.
    job = make_job(
        schedule="@every 10m",
        last_scheduled_at=NOW - timedelta(minutes=61),
        next_run_at=NOW - timedelta(minutes=51),
    )
    with time_machine.travel(NOW, tick=False):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    assert next_fires(html)[:2] == ["2026-11-30T12:09:00Z", "2026-11-30T12:19:00Z"]


def test_job_page_shows_a_berlin_job_at_nine_with_utc_beside_across_dst(staff_client, make_job):
    job = make_job(schedule="0 9 * * 1-5", timezone="Europe/Berlin")
    # Thursday 26 March 2026; summer time starts on Sunday the 29th.
    with time_machine.travel(datetime(2026, 3, 26, 12, 0, tzinfo=UTC), tick=False):
        html = staff_client.get(reverse("dashboard:job", args=[job.name])).content.decode()
    fires = re.search(r"data-next-fires>(.*?)</ol>", html, re.S).group(1)
    items = re.findall(r"<li>(.*?)</li>", fires)
    assert [re.sub(r"<[^>]+>", "", item) for item in items[:3]] == [
        "2026-03-27 09:00:00 CET (08:00:00 UTC)",
        "2026-03-30 09:00:00 CEST (07:00:00 UTC)",
        "2026-03-31 09:00:00 CEST (07:00:00 UTC)",
    ]
    assert next_fires(html)[:2] == ["2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z"]
    assert "in the job's zone, Europe/Berlin" in html


def test_execution_page_shows_metadata_and_the_whole_log(
    staff_client, make_job, make_execution, make_runner, add_log, django_assert_max_num_queries
):
    runner = make_runner("web-1")
    execution = make_execution(
        make_job("nightly-report"),
        state=Execution.FAILED,
        runner=runner,
        claimed_at=NOW,
        finished_at=NOW + timedelta(seconds=42),
        exit_code=3,
        error="exit status 3",
    )
    add_log(execution, "starting\n", "<b>not markup</b>\n", "done\n")

    with django_assert_max_num_queries(EXECUTION_QUERIES):
        html = staff_client.get(
            reverse("dashboard:execution", args=[execution.pk])
        ).content.decode()

    assert "starting\n&lt;b&gt;not markup&lt;/b&gt;\ndone\n</pre>" in html
    assert "web-1" in html and "42.0 s" in html and "exit status 3" in html
    # Finished: no live tail.
    assert "data-live" not in html
    assert 'data-after="2"' in html


def test_running_execution_page_tails_the_log_from_its_last_chunk(
    staff_client, make_job, make_execution, add_log
):
    execution = make_execution(make_job(), state=Execution.RUNNING, claimed_at=NOW)
    add_log(execution, "one\n")
    html = staff_client.get(reverse("dashboard:execution", args=[execution.pk])).content.decode()
    url = reverse("dashboard:execution-log", args=[execution.pk])
    assert f'data-live data-url="{url}" data-after="0"' in html


def test_log_endpoint_returns_chunks_after_a_seq_and_whether_the_run_is_live(
    staff_client, make_job, make_execution, add_log
):
    execution = make_execution(make_job(), state=Execution.RUNNING)
    add_log(execution, "one\n", "two\n", "three\n")
    url = reverse("dashboard:execution-log", args=[execution.pk])

    body = staff_client.get(url, {"after": 0}).json()
    assert body["chunks"] == [{"seq": 1, "data": "two\n"}, {"seq": 2, "data": "three\n"}]
    assert (body["state"], body["live"], body["more"]) == ("running", True, False)

    assert body["fields"]["exit_code"] == "—"
    Execution.objects.filter(pk=execution.pk).update(
        state=Execution.TIMED_OUT, claimed_at=NOW, finished_at=NOW + timedelta(seconds=90)
    )
    body = staff_client.get(url, {"after": 2}).json()
    assert body["chunks"] == []
    assert (body["state"], body["state_label"], body["live"]) == ("timed_out", "timed out", False)
    assert body["fields"]["duration"] == "90.0 s"
    assert 'datetime="2026-11-30T12:01:30Z"' in body["fields"]["finished_at"]


def test_log_endpoint_refuses_a_seq_that_is_not_a_number(staff_client, make_job, make_execution):
    execution = make_execution(make_job())
    url = reverse("dashboard:execution-log", args=[execution.pk])
    answer = staff_client.get(url, {"after": "x"})
    assert answer.status_code == 400
    assert "after" in answer.json()["detail"]


def test_runners_page_shows_flapping_badge_labels_work_and_takeovers(
    staff_client, make_job, make_execution, make_runner, django_assert_max_num_queries
):
    flappy = make_runner(
        "flappy", labels=["linux", "gpu"], takeover_count=9, flapping=True, flapping_since=NOW
    )
    make_runner("calm", labels=["linux"])
    make_execution(
        make_job("nightly-report"), state=Execution.RUNNING, runner=flappy, claimed_at=NOW
    )

    with django_assert_max_num_queries(RUNNERS_QUERIES):
        html = staff_client.get(reverse("dashboard:runners")).content.decode()

    flappy_row = html.split('data-runner="flappy"')[1].split("</tr>")[0]
    calm_row = html.split('data-runner="calm"')[1].split("</tr>")[0]
    assert "data-flapping" in flappy_row and "data-flapping" not in calm_row
    assert "gpu" in flappy_row and "nightly-report" in flappy_row
    assert "<td>9</td>" in flappy_row
    assert "idle" in calm_row


def test_audit_page_query_count_is_bounded(staff_client, db, django_assert_max_num_queries):
    with django_assert_max_num_queries(AUDIT_QUERIES):
        assert staff_client.get(reverse("dashboard:audit")).status_code == 200


def test_a_finished_run_without_output_says_so_instead_of_an_empty_log(
    staff_client, make_job, make_execution
):
    execution = make_execution(make_job())
    html = staff_client.get(reverse("dashboard:execution", args=[execution.pk])).content.decode()
    assert "This run wrote no output." in html
    assert '<pre class="log"' not in html


def test_a_run_whose_log_the_retention_deleted_says_so(
    staff_client, make_job, make_execution, settings
):
    settings.CRONIQ_LOG_RETENTION_DAYS = 30
    ended = NOW - timedelta(days=40)
    execution = make_execution(make_job(), scheduled_for=ended, finished_at=ended, log_size=6)
    execution.log_chunks.create(seq=0, data="hello\n")
    execution.log_chunks.update(created_at=ended)
    assert retention.prune(NOW).logs == 1

    html = staff_client.get(reverse("dashboard:execution", args=[execution.pk])).content.decode()
    assert "output was deleted" in html
    assert "wrote no output" not in html


def test_the_overview_of_a_new_installation_points_to_where_jobs_come_from(staff_client):
    html = staff_client.get(reverse("dashboard:overview")).content.decode()
    assert "No jobs yet." in html
    assert "manage.py apply" in html


def test_the_overview_finds_jobs_by_part_of_their_name_and_keeps_it_while_paging(
    staff_client, make_job
):
    for i in range(queries.JOBS_PER_PAGE + 1):
        make_job(f"report-{i:03}")
    make_job("cleanup")

    answer = staff_client.get(reverse("dashboard:overview"), {"q": "PORT"})
    html = answer.content.decode()

    assert 'data-job="cleanup"' not in html
    assert 'data-job="report-000"' in html
    assert 'href="?q=PORT&amp;page=2"' in html
    assert 'name="q" value="PORT"' in html
    nothing = staff_client.get(reverse("dashboard:overview"), {"q": "zzz"}).content.decode()
    assert "No job name contains “zzz”." in nothing


def test_the_overview_shows_each_schedule_in_words_on_hover(staff_client, make_job):
    make_job("nightly-report", schedule="30 2 * * *")
    html = staff_client.get(reverse("dashboard:overview")).content.decode()
    assert '<code title="At 02:30 AM">30 2 * * *</code>' in html


def test_the_job_page_says_a_paused_job_fires_only_after_it_is_resumed(staff_client, make_job):
    paused = make_job(paused_at=NOW)
    active = make_job()
    html = staff_client.get(reverse("dashboard:job", args=[paused.name])).content.decode()
    assert "none of these fire until it is resumed" in html
    html = staff_client.get(reverse("dashboard:job", args=[active.name])).content.decode()
    assert "data-inactive-note" not in html


def test_the_job_page_says_a_job_paused_until_an_instant_fires_after_it(staff_client, make_job):
    paused = make_job(paused_at=NOW, paused_until=NOW + timedelta(hours=2))
    html = staff_client.get(reverse("dashboard:job", args=[paused.name])).content.decode()
    assert "these are its fire times after that" in html
    assert "none of these fire" not in html


def test_a_job_with_a_schedule_that_does_not_parse_still_has_a_page(staff_client, make_job):
    job = make_job(schedule="every full moon")
    answer = staff_client.get(reverse("dashboard:job", args=[job.name]))
    html = answer.content.decode()
    assert answer.status_code == 200
    assert "<span data-schedule-words>every full moon</span>" in html
    assert "Cannot compute fire times" in html


def test_the_job_history_shows_one_state_at_a_time_on_request(staff_client, make_job, make_history):
    job = make_job()
    runs = make_history(job, 12)
    failed = [r.pk for r in runs if r.state == Execution.FAILED]

    answer = staff_client.get(reverse("dashboard:job", args=[job.name]), {"state": "failed"})

    assert [r.pk for r in answer.context["page"].items] == failed
    assert 'href="?state=failed" aria-current="true"' in answer.content.decode()
    unknown = staff_client.get(reverse("dashboard:job", args=[job.name]), {"state": "bogus"})
    assert len(unknown.context["page"].items) == 12
