"""/metrics asks for a bearer token when CRONIQ_METRICS_TOKEN is set."""

import pytest

pytestmark = pytest.mark.django_db

TOKEN = "croniq-metrics-0123456789"


def scrape(client, authorization=None):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    return client.get("/metrics", **headers)


@pytest.mark.parametrize(
    "authorization",
    [None, "", f"Bearer {TOKEN}x", "Bearer wrong", f"Basic {TOKEN}", TOKEN, "Bearer"],
)
def test_a_scrape_without_the_right_token_is_refused(client, settings, authorization):
    settings.CRONIQ_METRICS_TOKEN = TOKEN
    answer = scrape(client, authorization)
    assert answer.status_code == 401
    assert answer["WWW-Authenticate"].startswith("Bearer")
    assert b"croniq_" not in answer.content


@pytest.mark.parametrize("scheme", ["Bearer", "bearer"])
def test_a_scrape_with_the_right_token_gets_the_metrics(client, settings, scheme):
    settings.CRONIQ_METRICS_TOKEN = TOKEN
    answer = scrape(client, f"{scheme} {TOKEN}")
    assert answer.status_code == 200
    assert b"croniq_executions_pending" in answer.content


def test_without_a_token_configured_metrics_stay_open(client, settings):
    settings.CRONIQ_METRICS_TOKEN = None
    answer = scrape(client)
    assert answer.status_code == 200
    assert b"croniq_executions_pending" in answer.content
