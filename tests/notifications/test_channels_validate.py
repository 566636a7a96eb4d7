import pytest

from notifications import channels, payloads


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", "s3cr3t")
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_TOKEN", "T0K3N")
    monkeypatch.setenv("CRONIQ_SECRET_SLACK_URL", "https://hooks.slack.com/services/T/B/X")
    monkeypatch.setenv("CRONIQ_SECRET_NOT_A_URL", "ftp://files.example.com")
    monkeypatch.delenv("CRONIQ_SECRET_NOT_SET", raising=False)


@pytest.mark.parametrize(
    ("kind", "config"),
    [
        ("email", {"to": ["ops@example.com", "oncall@team-a.example.org"]}),
        ("webhook", {"url": "https://hooks.example.com/croniq"}),
        (
            "webhook",
            {
                "url": "http://alert-router:9000/in?token=${CRONIQ_SECRET_HOOK_TOKEN}",
                "secret": "${CRONIQ_SECRET_HOOK}",
                "headers": {"Authorization": "Bearer ${CRONIQ_SECRET_HOOK_TOKEN}", "X-Team": "a"},
                "timeout": 2.5,
            },
        ),
        (
            "webhook",
            {
                "url": "https://${CRONIQ_SECRET_HOOK_TOKEN}.example.com:${CRONIQ_SECRET_HOOK_TOKEN}/x"
            },
        ),
        ("slack", {"url": "${CRONIQ_SECRET_SLACK_URL}"}),
        ("slack", {"url": "https://hooks.slack.com/services/T/B/X", "format": "slack"}),
        ("slack", {"url": "https://discord.com/api/webhooks/1/x", "format": "discord"}),
        ("slack", {"url": "https://example.logic.azure.com/wf", "format": "teams", "timeout": 60}),
        ("slack", {"url": "https://chat.example.com/hooks/x", "username": "Croniq"}),
    ],
)
def test_a_good_config_has_no_problems(kind, config):
    assert channels.validate(kind, config) == {}


@pytest.mark.parametrize(
    ("kind", "config", "field", "message"),
    [
        ("sms", {}, "kind", "kind: unknown channel kind 'sms': one of email, webhook, slack"),
        ("email", ["ops@example.com"], "config", "config: the email channel's settings"),
        ("email", {}, "to", "to: required"),
        ("email", {"to": []}, "to", "to: a list of one or more addresses"),
        ("email", {"to": "ops@example.com"}, "to", "to: a list of one or more addresses"),
        ("email", {"to": ["ops@example.com", "ops@"]}, "to", "to: not an email address: 'ops@'"),
        ("email", {"to": [42]}, "to", "to: not an email address: 42"),
        ("email", {"to": ["ops@example.com"], "cc": []}, "cc", "cc: unknown setting"),
        ("webhook", {}, "url", "url: required"),
        ("webhook", {"url": ""}, "url", "url: required: an http(s) URL"),
        ("webhook", {"url": "ftp://x"}, "url", "url: not an http(s) URL: 'ftp://x'"),
        ("webhook", {"url": "hooks.example.com"}, "url", "url: not an http(s) URL"),
        ("webhook", {"url": "https:///path"}, "url", "url: no host in 'https:///path'"),
        ("webhook", {"url": "https://h.example/a b"}, "url", "url: spaces or control"),
        ("webhook", {"url": "https://h.example:99999/"}, "url", "url: not a valid URL"),
        ("webhook", {"url": "https://[::1/"}, "url", "url: not a valid URL"),
        (
            "webhook",
            {"url": "ftp://${CRONIQ_SECRET_HOOK_TOKEN}/x"},
            "url",
            "url: not an http(s) URL: 'ftp://${",
        ),
        (
            "webhook",
            {"url": "https://h.example/${CRONIQ_SECRET_NOT_SET}"},
            "url",
            "url: ${CRONIQ_SECRET_NOT_SET} is not set in the environment",
        ),
        (
            "slack",
            {"url": "${CRONIQ_SECRET_NOT_A_URL}"},
            "url",
            "url: ${CRONIQ_SECRET_NOT_A_URL} does not hold an http(s) URL",
        ),
        ("webhook", {"url": "https://h.example", "secret": "hunter2"}, "secret", "secret: not a"),
        (
            "webhook",
            {"url": "https://h.example", "secret": "${CRONIQ_SECRET_NOT_SET}"},
            "secret",
            "secret: ${CRONIQ_SECRET_NOT_SET} is not set in the environment",
        ),
        ("webhook", {"url": "https://h.example", "secret": 42}, "secret", "secret: a reference"),
        (
            "webhook",
            {"url": "https://h.example", "headers": ["a"]},
            "headers",
            "headers: a mapping",
        ),
        (
            "webhook",
            {"url": "https://h.example", "headers": {"Content-Type": "text/plain"}},
            "headers",
            "headers: Content-Type is set by Croniq and cannot be overridden",
        ),
        (
            "webhook",
            {"url": "https://h.example", "headers": {"croniq-signature": "forged"}},
            "headers",
            "headers: croniq-signature is set by Croniq",
        ),
        (
            "webhook",
            {"url": "https://h.example", "headers": {"Bad Name": "x"}},
            "headers",
            "headers: not a valid header name: 'Bad Name'",
        ),
        (
            "webhook",
            {"url": "https://h.example", "headers": {"X-A": "a\r\nX-Injected: 1"}},
            "headers",
            "headers: X-A: line breaks are not allowed",
        ),
        (
            "webhook",
            {"url": "https://h.example", "headers": {"X-A": 3}},
            "headers",
            "headers: X-A: the value must be text",
        ),
        (
            "webhook",
            {
                "url": "https://h.example",
                "headers": {"Authorization": "Bearer ${CRONIQ_SECRET_NOT_SET}"},
            },
            "headers",
            "headers: Authorization: ${CRONIQ_SECRET_NOT_SET} is not set in the environment",
        ),
        (
            "webhook",
            {"url": "https://h.example", "timeout": 0},
            "timeout",
            "timeout: seconds, more",
        ),
        (
            "webhook",
            {"url": "https://h.example", "timeout": -1},
            "timeout",
            "timeout: seconds, more",
        ),
        (
            "webhook",
            {"url": "https://h.example", "timeout": 61},
            "timeout",
            "timeout: seconds, more than 0 and at most 60, got 61",
        ),
        (
            "webhook",
            {"url": "https://h.example", "timeout": "5"},
            "timeout",
            "timeout: seconds as a number",
        ),
        (
            "webhook",
            {"url": "https://h.example", "timeout": True},
            "timeout",
            "timeout: seconds as a number",
        ),
        ("webhook", {"url": "https://h.example", "format": "teams"}, "format", "format: unknown"),
        (
            "slack",
            {"url": "https://h.example", "format": "irc"},
            "format",
            "format: unknown format",
        ),
        ("slack", {"url": "https://h.example", "secret": "${X}"}, "secret", "secret: unknown"),
        ("slack", {"url": "https://h.example", "username": ""}, "username", "username: a name"),
        (
            "slack",
            {"url": "https://h.example", "username": "x" * 81},
            "username",
            "username: one line of at most 80 characters",
        ),
        (
            "slack",
            {"url": "https://h.example", "format": "teams", "username": "Croniq"},
            "username",
            "username: Teams webhooks take no username",
        ),
    ],
)
def test_a_bad_config_names_the_field(kind, config, field, message):
    problems = channels.validate(kind, config)
    assert list(problems) == [field]
    assert problems[field].startswith(message)


def test_every_problem_is_listed_at_once():
    problems = channels.validate(
        "webhook", {"url": "ftp://x", "secret": "hunter2", "timeout": 0, "retries": 3}
    )
    assert sorted(problems) == ["retries", "secret", "timeout", "url"]


def test_a_literal_secret_is_never_echoed():
    problems = channels.validate("webhook", {"url": "https://h.example", "secret": "hunter2"})
    assert "hunter2" not in problems["secret"]


def test_the_reference_a_refusal_suggests_is_one_a_channel_may_read(settings):
    """The example in the message must itself pass the limits on references."""
    from notifications import secrets

    problem = channels.validate("webhook", {"url": "https://h.example", "secret": 42})["secret"]
    examples = problem.removeprefix("a reference such as ").split(" or ")
    assert len(examples) == 2
    assert all(secrets.forbidden(example) is None for example in examples)


def test_a_url_held_in_a_secret_is_never_echoed(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_BAD_HOOK", "gopher://secret-token@h.example")
    problems = channels.validate("slack", {"url": "${CRONIQ_SECRET_BAD_HOOK}"})
    assert "secret-token" not in problems["url"]


def test_a_bad_config_is_refused_by_render_and_send(message):
    bad = {"url": "ftp://x"}
    with pytest.raises(ValueError, match=r"^url: not an http\(s\) URL: 'ftp://x'$"):
        payloads.render("webhook", bad, message, now=0)
    with pytest.raises(ValueError, match=r"^url: not an http\(s\) URL"):
        channels.send("webhook", bad, message, now=0)
    with pytest.raises(ValueError, match="^to: required$"):
        channels.send("email", {}, message, now=0)
