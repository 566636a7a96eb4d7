from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from audit.recording import record
from tests.checks.factories import CheckFactory


@pytest.fixture
def world(make_job, make_execution, make_runner, add_log):
    job = make_job("nightly-report")
    execution = make_execution(job)
    add_log(execution, "hello\n")
    runner = make_runner("web-1")
    record("runner.takeover", target=runner, actor=runner)
    check = CheckFactory(name="backup")
    return {"job": job, "execution": execution, "check": check}


@pytest.fixture
def pages(world):
    execution = world["execution"]
    return [
        reverse("dashboard:overview"),
        reverse("dashboard:job", args=[world["job"].name]),
        reverse("dashboard:execution", args=[execution.pk]),
        reverse("dashboard:execution-log", args=[execution.pk]) + "?after=-1",
        reverse("dashboard:runners"),
        reverse("dashboard:runners-rows"),
        reverse("dashboard:capacity"),
        reverse("dashboard:audit") + "?action=runner.takeover",
        reverse("dashboard:alerts"),
        reverse("dashboard:dead-letters"),
        reverse("dashboard:checks"),
        reverse("dashboard:check", args=[world["check"].name]),
    ]


def test_anonymous_users_are_sent_to_the_login_page(client, pages):
    for url in pages:
        answer = client.get(url)
        assert answer.status_code == 302, url
        assert answer["Location"].startswith("/accounts/login/?next="), url


def test_signed_in_users_who_are_not_staff_get_403(client, pages):
    user = get_user_model().objects.create_user("visitor", password="pw")
    client.force_login(user)
    for url in pages:
        assert client.get(url).status_code == 403, url


def test_inactive_staff_cannot_read_the_dashboard(client, pages):
    user = get_user_model().objects.create_user("gone", password="pw", is_staff=True)
    client.force_login(user)
    user.is_active = False
    user.save()
    # Django's auth backend logs inactive users out on the next request.
    answer = client.get(pages[0])
    assert answer.status_code == 302


def test_staff_without_the_view_permissions_get_403(client, pages):
    user = get_user_model().objects.create_user("new-hire", password="pw", is_staff=True)
    client.force_login(user)
    for url in pages:
        assert client.get(url).status_code == 403, url


def test_staff_users_can_read_every_page(staff_client, pages):
    for url in pages:
        assert staff_client.get(url).status_code == 200, url


def test_dashboard_pages_refuse_writes(staff_client, pages):
    for url in pages:
        assert staff_client.post(url).status_code == 405, url


class FormFinder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.forms = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append({"method": (attrs.get("method") or "get").lower(), "csrf": False})
        elif tag == "input" and attrs.get("name") == "csrfmiddlewaretoken" and self.forms:
            self.forms[-1]["csrf"] = bool(attrs.get("value"))


@pytest.fixture(params=["viewer", "superuser"])
def any_client(request, client, staff_user):
    """A reader (no buttons) and a superuser (every button)."""
    if request.param == "superuser":
        staff_user = get_user_model().objects.create_superuser("root", password=None)
    client.force_login(staff_user)
    return client


def test_every_post_form_on_every_page_carries_the_csrf_token(any_client, pages):
    seen_post = 0
    for url in pages:
        answer = any_client.get(url)
        if answer["Content-Type"].startswith("application/json"):
            continue
        finder = FormFinder()
        finder.feed(answer.content.decode())
        for form in finder.forms:
            if form["method"] == "post":
                seen_post += 1
                assert form["csrf"], url
            else:
                assert form["method"] == "get", url
    # The logout button is a POST form on every HTML page.
    assert seen_post >= 5


def test_the_audit_filter_form_is_a_get_form(staff_client, world):
    finder = FormFinder()
    finder.feed(staff_client.get(reverse("dashboard:audit")).content.decode())
    assert [f["method"] for f in finder.forms] == ["post", "get"]


def test_logging_out_without_the_csrf_token_is_refused(staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    assert client.post(reverse("admin:logout")).status_code == 403
    # Still signed in.
    assert client.get(reverse("dashboard:runners")).status_code == 200


def test_logging_out_with_the_token_from_the_page_works(staff_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    page = client.get(reverse("dashboard:runners"))
    token = page.context["csrf_token"]
    assert str(token) in page.content.decode()
    answer = client.post(reverse("admin:logout"), {"csrfmiddlewaretoken": str(token)})
    assert answer.status_code == 200
    assert client.get(reverse("dashboard:runners")).status_code == 302


def test_an_action_without_the_csrf_token_is_refused(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    job = world["job"]
    answer = client.post(reverse("dashboard:job-pause", args=[job.name]))
    assert answer.status_code == 403
    job.refresh_from_db()
    assert job.paused_at is None
