"""The ping endpoints through Django's test client (docs/design.md §12):
healthchecks.io's URLs, no key, the token alone; floods answered 429."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from checks import states
from checks.models import MAX_BODY, Check, Ping
from notifications.models import Event
from tests.checks.factories import CheckFactory

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def check():
    return CheckFactory(name="backup", period=3600, grace=300)


def pings_of(check):
    return list(check.pings.order_by("n"))


def test_a_get_is_a_success(client, check):
    answer = client.get(f"/ping/{check.token}")
    assert (answer.status_code, answer.content) == (200, b"OK")
    check.refresh_from_db()
    assert (check.state, check.last_ping_at) == (states.UP, NOW)
    assert check.next_expected_at == NOW + timedelta(hours=1)
    assert check.down_at == NOW + timedelta(hours=1, minutes=5)
    [ping] = pings_of(check)
    assert (ping.kind, ping.n, ping.received_at) == (states.SUCCESS, 1, NOW)


def test_a_post_is_a_success_and_keeps_its_body_as_the_log(client, check):
    answer = client.post(
        f"/ping/{check.token}",
        data=b"backed up 3 GB",
        content_type="text/plain",
        HTTP_USER_AGENT="curl/8.5",
        REMOTE_ADDR="10.0.0.7",
    )
    assert answer.status_code == 200
    [ping] = pings_of(check)
    assert (ping.body, ping.body_truncated, ping.user_agent, ping.remote_addr) == (
        "backed up 3 GB",
        False,
        "curl/8.5",
        "10.0.0.7",
    )


def test_a_post_needs_no_csrf_token(check):
    from django.test import Client

    answer = Client(enforce_csrf_checks=True).post(f"/ping/{check.token}")
    assert answer.status_code == 200


@pytest.mark.parametrize(
    "suffix, kind, exit_status, state",
    [
        ("/start", states.START, None, states.NEW),
        ("/fail", states.FAIL, None, states.DOWN),
        ("/0", states.EXIT, 0, states.UP),
        ("/1", states.EXIT, 1, states.DOWN),
        ("/255", states.EXIT, 255, states.DOWN),
        ("/log", states.LOG, None, states.NEW),
    ],
)
def test_each_kind_of_ping(client, check, suffix, kind, exit_status, state):
    assert client.get(f"/ping/{check.token}{suffix}").status_code == 200
    check.refresh_from_db()
    assert check.state == state
    [ping] = pings_of(check)
    assert (ping.kind, ping.exit_status) == (kind, exit_status)


@pytest.mark.parametrize("suffix", ["/256", "/1000", "/99999999999999999999"])
def test_an_exit_status_past_255_is_refused_and_changes_nothing(client, check, suffix):
    answer = client.get(f"/ping/{check.token}{suffix}")
    assert answer.status_code == 400
    assert b"0 to 255" in answer.content
    assert not Ping.objects.exists()


@pytest.mark.parametrize("suffix", ["/stop", "/-1", "/start/extra", "/"])
def test_other_suffixes_are_not_found(client, check, suffix):
    assert client.get(f"/ping/{check.token}{suffix}").status_code == 404
    assert not Ping.objects.exists()


def test_a_log_ping_stores_its_body_and_changes_no_state(client, check):
    client.get(f"/ping/{check.token}")
    client.post(f"/ping/{check.token}/log", data=b"step 2 of 5", content_type="text/plain")
    check.refresh_from_db()
    assert check.state == states.UP and check.last_ping_at == NOW
    assert [(p.kind, p.body) for p in pings_of(check)] == [
        (states.SUCCESS, ""),
        (states.LOG, "step 2 of 5"),
    ]


def test_the_finishing_ping_carries_the_run_s_duration(client, check):
    client.get(f"/ping/{check.token}/start")
    with time_machine.travel(NOW + timedelta(seconds=90), tick=False):
        client.get(f"/ping/{check.token}")
    assert [p.duration for p in pings_of(check)] == [None, timedelta(seconds=90)]


def test_an_unknown_token_is_not_found_and_nothing_is_written(client, check):
    for token in ["A" * 43, "x", "not a token!", "%00", "A" * 65]:
        assert client.get(f"/ping/{token}").status_code == 404, token
    assert not Ping.objects.exists()
    check.refresh_from_db()
    assert check.state == states.NEW


def test_a_ping_changes_only_the_check_whose_token_it_carries(client, check):
    other = CheckFactory(name="other")
    # The other check's token in the body, a header and the query: ignored.
    client.post(
        f"/ping/{check.token}/fail?token={other.token}",
        data=other.token.encode(),
        content_type="text/plain",
        HTTP_X_CHECK_TOKEN=other.token,
    )
    other.refresh_from_db()
    assert (other.state, other.n_pings) == (states.NEW, 0)
    assert Ping.objects.get().subject == check


def test_head_records_nothing_and_looks_nothing_up(client, check, django_assert_num_queries):
    with django_assert_num_queries(0):
        known = client.head(f"/ping/{check.token}")
        unknown = client.head("/ping/" + "B" * 43)
    assert known.status_code == unknown.status_code == 200
    assert not Ping.objects.exists()


@pytest.mark.parametrize("method", ["put", "delete", "patch"])
def test_other_methods_are_refused(client, check, method):
    answer = getattr(client, method)(f"/ping/{check.token}")
    assert answer.status_code == 405
    assert answer["Allow"] == "GET, POST, HEAD"
    assert not Ping.objects.exists()


def test_a_body_past_100_kb_is_cut_and_the_answer_says_so(client, check):
    body = b"a" * (MAX_BODY - 1) + "é".encode() + b"tail" * 1000
    answer = client.post(f"/ping/{check.token}", data=body, content_type="text/plain")
    assert (answer.status_code, answer.content) == (200, b"OK")
    assert answer["Croniq-Body-Truncated"] == "true"
    ping = Ping.objects.get()
    assert ping.body_truncated
    # The 'é' was cut in half at the limit: its first byte reads as U+FFFD.
    assert ping.body == "a" * (MAX_BODY - 1) + "\ufffd"


def test_a_body_of_exactly_100_kb_is_kept_whole(client, check):
    answer = client.post(f"/ping/{check.token}", data=b"b" * MAX_BODY, content_type="text/plain")
    assert "Croniq-Body-Truncated" not in answer
    ping = Ping.objects.get()
    assert (len(ping.body), ping.body_truncated) == (MAX_BODY, False)


def test_a_body_that_is_not_utf8_is_stored_readably(client, check):
    body = b"caf\xe9 \xff\xfe ok \x00 end"
    assert client.post(f"/ping/{check.token}", data=body, content_type="text/plain").status_code
    assert Ping.objects.get().body == "caf\ufffd \ufffd\ufffd ok \ufffd end"


def test_a_flood_is_limited_per_token(client, check, settings):
    settings.CRONIQ_PING_LIMIT = 3
    settings.CRONIQ_PING_WINDOW = 60
    other = CheckFactory(name="other")
    answers = [client.get(f"/ping/{check.token}").status_code for _ in range(5)]
    assert answers == [200, 200, 200, 429, 429]
    assert b"rate limited" in client.get(f"/ping/{check.token}").content
    assert check.pings.count() == 3  # a refused ping writes nothing
    assert client.get(f"/ping/{other.token}").status_code == 200  # per token
    with time_machine.travel(NOW + timedelta(seconds=60), tick=False):
        assert client.get(f"/ping/{check.token}").status_code == 200  # a new window


def test_the_limit_is_counted_on_the_row_so_every_web_process_shares_it(client, check, settings):
    settings.CRONIQ_PING_LIMIT = 2
    client.get(f"/ping/{check.token}")
    # Another process's ping, as the database holds it: the count is the row's.
    Check.objects.filter(pk=check.pk).update(rate_count=2)
    assert client.get(f"/ping/{check.token}").status_code == 429


def test_a_fail_ping_records_check_down_in_the_outbox_in_its_transaction(client, check):
    client.get(f"/ping/{check.token}")
    client.get(f"/ping/{check.token}/fail")
    [event] = Event.objects.all()
    assert (event.name, event.at, event.routed_at) == ("check.down", NOW, None)
    assert event.data["check"] == {
        "name": "backup",
        "project": "default",
        "state": "down",
        "last_ping_at": NOW.isoformat(),
    }
    assert event.data["reason"] == "a fail ping"


def test_a_non_zero_exit_says_its_status_and_a_success_after_down_is_check_up(client, check):
    client.get(f"/ping/{check.token}/3")
    client.get(f"/ping/{check.token}/3")  # already down: no second event
    client.get(f"/ping/{check.token}")
    assert [(e.name, e.data["reason"]) for e in Event.objects.order_by("id")] == [
        ("check.down", "exit status 3"),
        ("check.up", "a success ping (was down)"),
    ]


def test_ordinary_pings_record_no_events(client, check):
    for suffix in ["", "/start", "", "/log", "/0"]:
        client.get(f"/ping/{check.token}{suffix}")
    assert not Event.objects.exists()
