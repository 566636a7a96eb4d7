"""The keyboard palette's entries (docs/design.md §17): the pages, jobs and
runners a user may read, in one small JSON answer read by palette.js."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

URL = "/palette"


@pytest.fixture
def world(make_job, make_runner):
    make_job("nightly-report", tags=["billing", "nightly"])
    make_job("cleanup")
    make_runner("web-1")


def test_a_reader_gets_every_page_job_and_runner_with_where_they_lead(staff_client, world):
    answer = staff_client.get(URL)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "application/json"
    assert "no-store" in answer["Cache-Control"]
    body = answer.json()
    assert [page["name"] for page in body["pages"]] == [
        "Overview", "Checks", "Runners", "Capacity", "Alerts", "Dead letters", "Audit", "Admin",
    ]  # fmt: skip
    assert body["pages"][0]["url"] == reverse("dashboard:overview")
    assert body["jobs"] == [
        {"name": "cleanup", "tags": []},
        {"name": "nightly-report", "tags": ["billing", "nightly"]},
    ]
    assert body["runners"] == [{"name": "web-1"}]
    assert body["urls"] == {"job": "/jobs/__name__/", "runner": "/runners/#runner-__name__"}


def test_each_entry_only_to_who_may_read_it(client, world):
    user = get_user_model().objects.create_user("jo", password=None, is_staff=True)
    client.force_login(user)
    body = client.get(URL).json()
    assert (body["pages"], body["jobs"], body["runners"]) == (
        [{"name": "Admin", "url": reverse("admin:index")}],
        [],
        [],
    )
    user.user_permissions.add(Permission.objects.get(codename="view_runner"))
    client.force_login(get_user_model().objects.get(pk=user.pk))  # permissions read afresh
    body = client.get(URL).json()
    assert [page["name"] for page in body["pages"]] == ["Runners", "Admin"]
    assert body["jobs"] == [] and body["runners"] == [{"name": "web-1"}]


def test_the_runners_page_has_the_anchor_the_palette_leads_to(staff_client, world):
    html = staff_client.get(reverse("dashboard:runners")).content.decode()
    assert '<td id="runner-web-1">' in html


def test_it_is_only_read(staff_client, world):
    assert staff_client.post(URL).status_code == 405


def test_anonymous_and_non_staff_get_no_entries(world):
    from django.test import Client

    anonymous = Client()
    assert anonymous.get(URL).status_code == 302
    outsider = Client()
    outsider.force_login(get_user_model().objects.create_user("visitor", password=None))
    assert outsider.get(URL).status_code == 403


def test_every_page_loads_the_palette_script(staff_client, world):
    html = staff_client.get(reverse("dashboard:runners")).content.decode()
    assert 'src="/static/dashboard/palette.js"' in html
    assert 'data-palette-url="/palette"' in html
    assert "data-palette-open" in html


def test_the_answer_is_three_reads_however_many_jobs(
    staff_client, make_job, django_assert_max_num_queries
):
    for i in range(300):
        make_job(f"job-{i:03}")
    # Session and user, the user's permissions, then the jobs and the runners.
    with django_assert_max_num_queries(6):
        body = staff_client.get(URL).json()
    assert len(body["jobs"]) == 300
