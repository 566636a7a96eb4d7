"""What a channel sends for a notification (docs/design.md §9): the HTTP
request of a webhook or chat channel (Slack, Mattermost, Rocket.Chat, Teams,
Discord) and the email of an email channel. No sending, no database.
"""

import json
import re
from datetime import datetime
from importlib import metadata
from typing import Any

from django.core.mail import EmailMessage
from django.core.serializers.json import DjangoJSONEncoder

from notifications import secrets
from notifications.channel_config import require_valid
from notifications.signatures import sign

DISCORD_LIMIT = 2000  # characters of `content`
MAX_DETAILS = 50  # detail lines shown; an incident of 500 jobs names the first ones
SUBJECT_LIMIT = 120
TEAMS_CARD = "application/vnd.microsoft.card.adaptive"


def _version():
    try:
        return metadata.version("croniq")
    except metadata.PackageNotFoundError:
        return "dev"


USER_AGENT = f"croniq/{_version()}"


def render(
    kind: str, config: dict[str, Any], message: dict[str, Any], now: datetime | float
) -> tuple[bytes, dict[str, str]]:
    """(body bytes, headers) of the HTTP request for a webhook or chat channel.

    Secrets are resolved here, at delivery time: ValueError when one is unset.
    """
    require_valid(kind, config)
    require_message(message)
    if kind == "email":
        raise ValueError("kind: an email channel is sent with email_message, not over HTTP")
    return build_request(kind, config, message, now)


def build_request(
    kind: str, config: dict[str, Any], message: dict[str, Any], now: datetime | float
) -> tuple[bytes, dict[str, str]]:
    """`render` of a config already checked."""
    if kind == "webhook":
        return _render_webhook(config, message, now)
    chat_format = config.get("format", "slack")
    payload = CHAT_FORMATS[chat_format](message, config.get("username"))
    return _json(payload), {"Content-Type": "application/json", "User-Agent": USER_AGENT}


def _render_webhook(config, message, now):
    body = _json(message)
    headers = {"User-Agent": USER_AGENT}
    for name, value in config.get("headers", {}).items():
        value = secrets.expand(value)
        if "\r" in value or "\n" in value:
            raise ValueError(f"headers: {name}: its secret holds a line break")
        headers[name] = value
    headers["Content-Type"] = "application/json"
    headers["Croniq-Event"] = message["event"]
    headers["Croniq-Delivery"] = str(message["id"])
    if config.get("secret"):
        headers["Croniq-Signature"] = sign(secrets.resolve(config["secret"]), now, body)
    return body, headers


def _json(payload):
    # Compact and deterministic: the same notification is the same bytes on
    # every retry. Dates, UUIDs and decimals become text.
    return json.dumps(payload, separators=(",", ":"), cls=DjangoJSONEncoder).encode()


def require_message(message: dict[str, Any]) -> None:
    """ValueError when the §9 body lacks what every channel shows."""
    missing = [key for key in ("id", "event", "summary", "url") if key not in message]
    if missing:
        raise ValueError(f"message: missing {', '.join(missing)}")


def chat_text(message: dict[str, Any], limit: int | None = None) -> str:
    """Summary, detail lines, then the dashboard link, within `limit` characters.

    Detail lines beyond MAX_DETAILS, or beyond the limit, are counted rather
    than shown; the link always stays.
    """
    summary = str(message["summary"])
    details = [str(line) for line in message.get("details") or ()]
    link = f"Open in Croniq: {message['url']}"
    shown = min(len(details), MAX_DETAILS)
    while True:
        text = _chat_lines(summary, details, shown, link)
        if limit is None or len(text) <= limit or shown == 0:
            break
        shown -= 1
    if limit is not None and len(text) > limit:
        rest = len(text) - len(summary)
        summary = summary[: max(limit - rest - 1, 0)] + "…"
        text = _chat_lines(summary, details, 0, link)[:limit]
    return text


def _chat_lines(summary, details, shown, link):
    lines = [summary, *details[:shown]]
    if shown < len(details):
        lines.append(f"… and {len(details) - shown} more")
    return "\n".join([*lines, link])


def _slack(message, username):
    # Slack reads <...> as links and mentions (<!channel>): a job name must
    # not page a whole channel. Mattermost and Rocket.Chat read the escapes too.
    text = chat_text(message)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    payload = {"text": text}
    if username:
        payload["username"] = username
    return payload


def _teams(message, username):
    # The Adaptive Card envelope that Teams Workflows ("when a Teams webhook
    # request is received") and the older connectors both accept.
    details = [str(line) for line in message.get("details") or ()]
    body = [
        {"type": "TextBlock", "text": str(message["summary"]), "weight": "Bolder", "wrap": True}
    ]
    body += [
        {"type": "TextBlock", "text": line, "wrap": True, "spacing": "None"}
        for line in details[:MAX_DETAILS]
    ]
    if len(details) > MAX_DETAILS:
        more = f"… and {len(details) - MAX_DETAILS} more"
        body.append({"type": "TextBlock", "text": more, "wrap": True, "spacing": "None"})
    card = {
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": body,
        "actions": [{"type": "Action.OpenUrl", "title": "Open in Croniq", "url": message["url"]}],
    }
    return {
        "type": "message",
        "attachments": [{"contentType": TEAMS_CARD, "contentUrl": None, "content": card}],
    }


def _discord(message, username):
    # No @everyone or role pings from a job's name or output.
    payload = {
        "content": chat_text(message, limit=DISCORD_LIMIT),
        "allowed_mentions": {"parse": []},
    }
    if username:
        payload["username"] = username
    return payload


CHAT_FORMATS = {"slack": _slack, "teams": _teams, "discord": _discord}


# -- email --------------------------------------------------------------------


def email_message(config: dict[str, Any], message: dict[str, Any], from_email: str) -> EmailMessage:
    """The plain-text email of a notification, addressed to the channel's `to`."""
    require_message(message)
    email = EmailMessage(
        subject=email_subject(message),
        body="\n".join(email_lines(message)),
        from_email=from_email,
        to=list(config["to"]),
        headers={
            "Croniq-Event": message["event"],
            "Croniq-Delivery": str(message["id"]),
        },
    )
    message_id = _message_id(message["id"], from_email)
    if message_id:
        # The same on every retry: mail clients drop a redelivered duplicate.
        email.extra_headers["Message-ID"] = message_id
    return email


def email_subject(message: dict[str, Any]) -> str:
    """`[Croniq] <summary>` on one line, cut at a word near SUBJECT_LIMIT."""
    summary = " ".join(str(message["summary"]).split())
    subject = f"[Croniq] {summary}"
    if len(subject) <= SUBJECT_LIMIT:
        return subject
    cut = subject[: SUBJECT_LIMIT - 1]
    if " " in cut[SUBJECT_LIMIT // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + "…"


def email_lines(message: dict[str, Any]) -> list[str]:
    """The body: summary, details, the facts of the job, run and runner, link."""
    details = [str(line) for line in message.get("details") or ()]
    lines = [str(message["summary"]), ""]
    if details:
        lines += details[:MAX_DETAILS]
        if len(details) > MAX_DETAILS:
            lines.append(f"… and {len(details) - MAX_DETAILS} more")
        lines.append("")
    lines.append(f"Event: {message['event']}" + (f" at {message['at']}" if "at" in message else ""))
    lines += _facts(message)
    lines += ["", f"Open in Croniq: {message['url']}", ""]
    lines.append(f"Delivery {message['id']}: a repeat with this id is the same notification.")
    return lines


def _facts(message):
    lines = []
    job = message.get("job")
    if job:
        extra = []
        if job.get("owner"):
            extra.append(f"owner: {job['owner']}")
        if job.get("labels"):
            extra.append(f"labels: {', '.join(map(str, job['labels']))}")
        lines.append(f"Job: {job.get('name', '?')}" + (f" ({'; '.join(extra)})" if extra else ""))
    execution = message.get("execution")
    if execution:
        facts = [
            f"{label} {execution[key]}{unit}"
            for key, label, unit in EXECUTION_FACTS
            if execution.get(key) is not None
        ]
        lines.append(f"Execution {execution.get('id', '?')}: " + ", ".join(facts))
    runner = message.get("runner")
    if runner:
        lines.append(f"Runner: {runner.get('name', '?')}")
    return lines


EXECUTION_FACTS = (
    ("state", "state", ""),
    ("scheduled_for", "scheduled for", ""),
    ("attempt", "attempt", ""),
    ("exit_code", "exit code", ""),
    ("duration", "took", " s"),
)


def _message_id(delivery_id, from_email):
    if not re.fullmatch(r"[A-Za-z0-9._-]+", str(delivery_id)):
        return None
    domain = str(from_email).rpartition("@")[2].strip(" >") or "croniq.invalid"
    return f"<croniq.{delivery_id}@{domain}>"
