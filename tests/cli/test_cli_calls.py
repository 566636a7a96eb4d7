"""How the `croniq` CLI reads the API's answers: exit codes, the short retry
while the server is away, lists read to their end, and `logs --follow`."""

import io

import pytest

from croniq_runner.cli_api import Api, Failed
from croniq_runner.cli_commands import follow


@pytest.mark.parametrize(
    ("status", "code"),
    [(401, 3), (403, 3), (404, 1), (409, 1), (422, 1), (429, 1)],
)
def test_a_refusal_exits_with_its_code_and_prints_the_detail(api, croniq, status, code):
    api.answer(status, {"detail": "the reason"}, {"Retry-After": "30"} if status == 429 else {})
    suffix = " (retry after 30 s)" if status == 429 else ""

    assert croniq("jobs", "show", "x") == (code, "", f"croniq: HTTP {status}: the reason{suffix}\n")


def test_a_read_is_retried_while_the_server_answers_503(api):
    api.answer(503, {"detail": "database unavailable"}).answer(200, {"name": "x"})
    pauses = []

    assert Api(api.url, "k", sleep=pauses.append).get("jobs/x") == {"name": "x"}
    assert pauses == [0.5]


def test_a_server_error_after_the_retries_exits_4(api):
    for _ in range(3):
        api.answer(500, {"detail": "boom"})
    pauses = []

    with pytest.raises(Failed) as failed:
        Api(api.url, "k", sleep=pauses.append).get("jobs/x")

    assert failed.value.code == 4
    assert len(api.asked) == 3 and pauses == [0.5, 1.5]


def test_a_change_is_not_sent_twice_after_a_server_error(api):
    api.answer(500, {"detail": "boom"})

    with pytest.raises(Failed) as failed:
        Api(api.url, "k", sleep=lambda _: None).post("jobs/x/trigger", {})

    assert failed.value.code == 4
    assert len(api.asked) == 1


def test_a_change_is_sent_again_after_a_503_which_changed_nothing(api):
    api.answer(503, {"detail": "database unavailable"})
    api.answer(202, {"execution_id": 1, "deduplicated": False})

    answer = Api(api.url, "k", sleep=lambda _: None).post("jobs/x/trigger", {})

    assert answer["execution_id"] == 1
    assert len(api.asked) == 2


def test_a_server_that_is_not_listening_exits_4_after_the_retries(api):
    url = api.url
    api.stop()
    pauses = []

    with pytest.raises(Failed) as failed:
        Api(url, "k", sleep=pauses.append).post("jobs/x/trigger", {})

    assert failed.value.code == 4
    assert str(failed.value) == f"cannot reach {url}: Connection refused"
    assert pauses == [0.5, 1.5]  # never connected: even a change is sent again


def test_a_list_is_read_to_its_end(api, croniq):
    api.answer(200, {"items": [{"id": 3}, {"id": 2}], "next_cursor": "c1"})
    api.answer(200, {"items": [{"id": 1}], "next_cursor": None})

    page = Api(api.url, "k").pages("executions", job="j")

    assert page == {"items": [{"id": 3}, {"id": 2}, {"id": 1}], "next_cursor": None}
    assert [a.query for a in api.asked] == [
        {"limit": "500", "job": "j"},
        {"limit": "500", "job": "j", "cursor": "c1"},
    ]


def test_a_limit_asks_for_no_more_than_it_shows(api):
    api.answer(200, {"items": [{"id": 3}, {"id": 2}], "next_cursor": "c1"})

    page = Api(api.url, "k").pages("executions", limit=2)

    assert page == {"items": [{"id": 3}, {"id": 2}], "next_cursor": "c1"}
    assert api.asked[0].query == {"limit": "2"}


def test_follow_prints_each_new_part_once_and_exits_with_the_jobs_code(api):
    api.answer(200, {"data": "one\n", "offset": 4, "complete": False})
    api.answer(200, {"data": "", "offset": 4, "complete": False})
    # The run ended between reading its log and its state: read once more.
    api.answer(200, {"data": "two\n", "offset": 8, "complete": True})
    api.answer(200, {"data": "", "offset": 8, "complete": True})
    api.answer(200, {"id": 5, "state": "failed", "exit_code": 3})
    out, pauses = io.StringIO(), []

    code = follow(Api(api.url, "k"), 5, out, io.StringIO(), sleep=pauses.append)

    assert (code, out.getvalue()) == (3, "one\ntwo\n")
    assert [a.query.get("offset") for a in api.asked[:4]] == ["0", "4", "4", "8"]
    assert api.asked[4].path == "/api/v1/executions/5"
    assert len(pauses) == 1


@pytest.mark.parametrize(
    ("execution", "code"),
    [
        ({"id": 5, "state": "succeeded", "exit_code": 0}, 0),
        ({"id": 5, "state": "lost", "exit_code": None}, 1),
        ({"id": 5, "state": "timed_out", "exit_code": None}, 1),
        ({"id": 5, "state": "failed", "exit_code": 300}, 1),
    ],
)
def test_follow_of_a_run_without_a_usable_exit_code_exits_1(api, execution, code):
    api.answer(200, {"data": "", "offset": 0, "complete": True}).answer(200, execution)
    err = io.StringIO()

    assert follow(Api(api.url, "k"), 5, io.StringIO(), err) == code
    assert ("without an exit code" in err.getvalue()) == (execution["exit_code"] is None)
