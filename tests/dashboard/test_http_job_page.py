"""The job page of an http job shows its request, method and URL, as the job
stores it: a secret's reference as written, never its value; header names
without their values."""

import datetime as dt
import re

from django.urls import reverse

from vault import store

VALUE = "s3cr3t-path-value"
TOKEN = "literal-token-in-a-header"


def dd(html, term):
    found = re.search(rf"<dt>{term}</dt><dd[^>]*>(.*?)</dd>", html, re.S)
    return found and re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_an_http_job_shows_its_method_and_url_as_written(staff_client, make_job):
    store.put("hook-path", VALUE, actor=None, now=dt.datetime(2026, 12, 1, tzinfo=dt.UTC))
    make_job(
        "ping-hook",
        kind="http",
        command="",
        http={
            "method": "POST",
            "url": "https://api.example.com/hooks/${secret:hook-path}?team=ops&v=2",
            "headers": {"Authorization": f"Bearer {TOKEN}", "X-Trace": "croniq"},
            "body": '{"ok": true}',
            "expect_status": [200, 204],
            "timeout": None,
        },
    )
    html = staff_client.get(reverse("dashboard:job", args=["ping-hook"])).content.decode()

    assert dd(html, "Request") == (
        "POST https://api.example.com/hooks/${secret:hook-path}?team=ops&amp;v=2"
        " headers Authorization, X-Trace; a body of 12 characters; expects 200, 204"
    )
    assert dd(html, "Command") is None
    assert VALUE not in html and TOKEN not in html


def test_an_http_job_with_the_defaults_expects_any_2xx(staff_client, make_job):
    make_job(
        "probe",
        kind="http",
        command="",
        http={"method": "GET", "url": "http://127.0.0.1:9/health", "headers": {}, "body": "",
              "expect_status": [], "timeout": None},
    )  # fmt: skip
    html = staff_client.get(reverse("dashboard:job", args=["probe"])).content.decode()
    assert dd(html, "Request") == "GET http://127.0.0.1:9/health expects any 2xx"


def test_a_shell_job_still_shows_its_command(staff_client, make_job):
    make_job("nightly", command="python report.py")
    html = staff_client.get(reverse("dashboard:job", args=["nightly"])).content.decode()
    assert dd(html, "Command") == "python report.py"
    assert dd(html, "Request") is None
