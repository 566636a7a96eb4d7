"""Chat webhooks: the bodies Slack (and Mattermost, Rocket.Chat), Teams and
Discord accept, delivered to a real receiver."""

import json

import pytest

from notifications import channels, payloads
from tests.notifications.conftest import NOW


def deliver(receiver, message, **config):
    result = channels.send("slack", {"url": receiver.url, **config}, message, now=NOW)
    assert result.ok, result.error
    [(_, headers, body)] = receiver.received
    assert headers["Content-Type"] == "application/json"
    assert "Croniq-Signature" not in headers
    return json.loads(body)


def test_slack_is_text_plus_an_optional_username(receiver, message):
    payload = deliver(receiver, message, username="Croniq")
    assert payload == {
        "text": "billing-sync failed 3 times in a row\n"
        "attempt 1: exit code 2\n"
        "attempt 2: exit code 2\n"
        "Open in Croniq: https://croniq.example.com/dashboard/jobs/billing-sync",
        "username": "Croniq",
    }


def test_slack_is_the_default_format_and_has_no_username_unless_set(receiver, message):
    del message["details"]
    payload = deliver(receiver, message)
    assert list(payload) == ["text"]
    assert payload["text"].splitlines() == [
        "billing-sync failed 3 times in a row",
        "Open in Croniq: https://croniq.example.com/dashboard/jobs/billing-sync",
    ]


def test_slack_control_sequences_in_a_job_name_are_escaped(receiver, message):
    message["summary"] = "<!channel> & <@U123> failed"
    payload = deliver(receiver, message, format="slack")
    assert payload["text"].startswith("&lt;!channel&gt; &amp; &lt;@U123&gt; failed\n")
    assert "<" not in payload["text"]


def test_teams_gets_an_adaptive_card_in_a_message_envelope(receiver, message):
    payload = deliver(receiver, message, format="teams")
    assert payload["type"] == "message"
    [attachment] = payload["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.4"
    texts = [block["text"] for block in card["body"]]
    assert texts == [
        "billing-sync failed 3 times in a row",
        "attempt 1: exit code 2",
        "attempt 2: exit code 2",
    ]
    assert all(block["type"] == "TextBlock" and block["wrap"] for block in card["body"])
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "Open in Croniq", "url": message["url"]}
    ]


def test_teams_shows_the_first_details_of_a_big_incident(receiver, message):
    message["details"] = [f"job-{n} failed" for n in range(120)]
    card = deliver(receiver, message, format="teams")["attachments"][0]["content"]
    texts = [block["text"] for block in card["body"]]
    assert len(texts) == 1 + payloads.MAX_DETAILS + 1
    assert texts[-1] == "… and 70 more"


def test_discord_is_content_without_mentions(receiver, message):
    message["summary"] = "@everyone billing-sync failed"
    payload = deliver(receiver, message, format="discord", username="Croniq")
    assert payload == {
        "content": "@everyone billing-sync failed\n"
        "attempt 1: exit code 2\n"
        "attempt 2: exit code 2\n"
        "Open in Croniq: https://croniq.example.com/dashboard/jobs/billing-sync",
        "allowed_mentions": {"parse": []},
        "username": "Croniq",
    }


def test_discord_content_stays_within_2000_characters_and_keeps_the_link(receiver, message):
    message["details"] = [
        f"job-{n:03} needing linux,db failed on build-3: " + "x" * 60 for n in range(40)
    ]
    content = deliver(receiver, message, format="discord")["content"]
    lines = content.splitlines()
    assert len(content) <= 2000
    assert lines[0] == message["summary"]
    assert lines[1].startswith("job-000 ")
    assert lines[-2].startswith("… and ") and lines[-2].endswith(" more")
    shown = len(lines) - 3
    assert lines[-2] == f"… and {40 - shown} more"
    assert lines[-1] == f"Open in Croniq: {message['url']}"


def test_a_summary_longer_than_discords_limit_is_cut_before_the_link(receiver, message):
    message["summary"] = "s" * 3000
    content = deliver(receiver, message, format="discord")["content"]
    assert len(content) <= 2000
    assert content.endswith(f"Open in Croniq: {message['url']}")
    assert content.startswith("sss") and "…" in content


@pytest.mark.parametrize("chat_format", ["slack", "teams", "discord"])
def test_a_failing_chat_webhook_is_a_result(receiver, message, chat_format):
    receiver.status, receiver.reply = 404, b"no_service"
    config = {"url": receiver.url, "format": chat_format}
    result = channels.send("slack", config, message, now=NOW)
    assert not result.ok
    # The status only: what the receiver answered stays out of the delivery log.
    assert (result.status_code, result.error) == (404, "HTTP 404")
