"""Under /api/ every refusal is JSON, also where no API view answered."""

import pytest

pytestmark = pytest.mark.django_db


def test_an_unknown_api_path_answers_json_404(client):
    answer = client.post("/api/v1/runners/1/no-such-call")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "Not Found"}


def test_a_wrong_method_answers_json_405_and_says_which_are_allowed(client):
    answer = client.get("/api/v1/runners/register")
    assert answer.status_code == 405
    assert answer.json() == {"detail": "Method Not Allowed"}
    assert answer["Allow"] == "POST"


def test_an_api_view_s_own_json_404_is_kept(client):
    from core import db_threads
    from runners.models import RunnerToken

    _, secret = RunnerToken.issue("errors")
    with db_threads.steps_in_caller_thread():  # the view sees this test's rows
        answer = client.post(
            "/api/v1/runners/424242/heartbeat",
            {"session": "s1"},
            content_type="application/json",
            headers={"authorization": f"Bearer {secret}"},
        )
    assert answer.status_code == 404
    assert answer.json()["detail"] != "Not Found"  # the view's own words


def test_pages_outside_the_api_keep_django_s_html_404(client):
    answer = client.get("/no-such-page")
    assert answer.status_code == 404
    assert not answer["Content-Type"].startswith("application/json")


def test_a_database_failure_answers_503_and_logs_its_reason(client, caplog):
    from django.db import OperationalError, connection

    from core import db_threads
    from runners.models import RunnerToken

    _, secret = RunnerToken.issue("errors")

    def schema_not_migrated(execute, sql, params, many, context):
        raise OperationalError("no such column: runners_runner.new_field")

    with db_threads.steps_in_caller_thread(), connection.execute_wrapper(schema_not_migrated):
        answer = client.post(
            "/api/v1/runners/424242/heartbeat",
            {"session": "s1"},
            content_type="application/json",
            headers={"authorization": f"Bearer {secret}"},
        )
    assert answer.status_code == 503
    assert answer.json() == {"detail": "database unavailable"}  # the caller learns no more
    assert "no such column: runners_runner.new_field" in caplog.text
