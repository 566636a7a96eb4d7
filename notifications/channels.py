"""Delivering one notification on one channel (docs/design.md §9): email, signed
webhooks, and chat webhooks (Slack, Mattermost, Rocket.Chat, Teams, Discord).

No database here: a channel is a kind and a config dict, a notification is
the §9 body dict (plus optional `details` lines). `validate` lists what is
wrong with a config, `render` builds the HTTP request, `send` delivers it and
returns a `Result`. A failed delivery is a result, never an exception; only a
bad config or an unset secret raises ValueError, for the caller to record.
"""

import hashlib
import hmac
import json
import os
import re
import smtplib
import time
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from urllib.parse import urlsplit

import requests
import urllib3
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMessage
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import validate_email

from core import mail
from notifications import egress, secrets

KINDS = ("email", "webhook", "slack")
# `slack` is also what Mattermost and Rocket.Chat accept.
FORMATS = ("slack", "teams", "discord")
FIELDS = {
    "email": ("to",),
    "webhook": ("url", "secret", "headers", "timeout"),
    "slack": ("url", "format", "username", "timeout"),
}
REQUIRED = {"email": ("to",), "webhook": ("url",), "slack": ("url",)}
DEFAULT_TIMEOUT = 5.0  # seconds, docs/design.md §9
MAX_TIMEOUT = 60.0
# Croniq writes these itself: a channel's own headers may not replace them.
RESERVED_HEADERS = {"content-type", "content-length", "host", "transfer-encoding"}
RESERVED_PREFIX = "croniq-"
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an RFC 9110 token
DISCORD_LIMIT = 2000  # characters of `content`
USERNAME_LIMIT = 80  # Discord's limit; Slack and Mattermost take as much
MAX_DETAILS = 50  # detail lines shown; an incident of 500 jobs names the first ones
SUBJECT_LIMIT = 120
ERROR_BODY_LIMIT = 200  # of an SMTP server's reply (the server is Croniq's own setting)
NO_SECRET_BELOW = 4  # shorter values are not scrubbed from error texts: too common
TEAMS_CARD = "application/vnd.microsoft.card.adaptive"


def _version():
    try:
        return metadata.version("croniq")
    except metadata.PackageNotFoundError:
        return "dev"


USER_AGENT = f"croniq/{_version()}"


@dataclass(frozen=True)
class Result:
    """The outcome of one delivery attempt, as the delivery log shows it."""

    ok: bool
    status_code: int | None = None  # HTTP status, or the SMTP code of a refusal
    error: str = ""
    latency: float = 0.0  # seconds


# -- validation ---------------------------------------------------------------


def validate(kind, config):
    """{field: "field: what is wrong"} for a channel's config; empty when fine."""
    if kind not in KINDS:
        return {"kind": f"kind: unknown channel kind {kind!r}: one of {', '.join(KINDS)}"}
    if not isinstance(config, dict):
        return {"config": f"config: the {kind} channel's settings as a mapping"}
    problems = {}
    for field in config:
        if field not in FIELDS[kind]:
            known = ", ".join(FIELDS[kind])
            problems[field] = f"{field}: unknown setting of a {kind} channel (known: {known})"
    for field in FIELDS[kind]:
        if field in config:
            problem = CHECKS[field](config[field])
        elif field in REQUIRED[kind]:
            problem = "required"
        else:
            problem = None
        if problem:
            problems[field] = f"{field}: {problem}"
    if config.get("format") == "teams" and "username" in config:
        problems.setdefault("username", "username: Teams webhooks take no username")
    return problems


def require_valid(kind, config):
    """Raise ValueError naming every problem of the config."""
    problems = validate(kind, config)
    if problems:
        raise ValueError("; ".join(problems.values()))


def _check_to(to):
    if not isinstance(to, list | tuple) or not to:
        return "a list of one or more addresses, e.g. [ops@example.com]"
    for address in to:
        try:
            if not isinstance(address, str):
                raise ValidationError("not text")
            validate_email(address)
        except ValidationError:
            return f"not an email address: {address!r}"
    return None


def _check_url(url):
    if not isinstance(url, str) or not url.strip():
        return "required: an http(s) URL"
    whole = secrets.is_reference(url)  # ${SLACK_WEBHOOK_URL}: the URL is the secret
    if not whole:
        # Checked with the references in place ("0" fits a host, a port and a
        # path): the values may differ where the notifier runs.
        problem = _url_shape(secrets.ENV_REFERENCE.sub("0", url), shown=url)
        if problem:
            return problem
    try:
        expanded = secrets.expand(url)
    except ValueError as error:
        return str(error)
    if whole and _url_shape(expanded, shown=url):
        return f"{url} does not hold an http(s) URL"  # never echo its value
    # An address written out is refused now; a host name when it resolves.
    return egress.literal_refusal(urlsplit(expanded).hostname or "")


def _url_shape(url, shown):
    if any(char.isspace() or ord(char) < 32 for char in url):
        return f"spaces or control characters in {shown!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        return f"not a valid URL: {shown!r}"
    if parts.scheme.lower() not in ("http", "https"):
        return f"not an http(s) URL: {shown!r}"
    if not parts.hostname:
        return f"no host in {shown!r}"
    return None


def _check_secret(secret):
    if secret is None:
        return None
    if not isinstance(secret, str):
        return "a reference such as file:/run/secrets/hook or ${CRONIQ_SECRET_HOOK}"
    try:
        secrets.validate_reference(secret)
    except ValueError as error:
        return str(error)
    return None


def _check_headers(headers):
    if not isinstance(headers, dict):
        return "a mapping of header names to values"
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            return f"not a valid header name: {name!r}"
        if name.lower() in RESERVED_HEADERS or name.lower().startswith(RESERVED_PREFIX):
            return f"{name} is set by Croniq and cannot be overridden"
        if not isinstance(value, str):
            return f"{name}: the value must be text, got {value!r}"
        if "\r" in value or "\n" in value:
            return f"{name}: line breaks are not allowed in a header value"
        try:
            secrets.expand(value)
        except ValueError as error:
            return f"{name}: {error}"
    return None


def _check_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        return f"seconds as a number, got {timeout!r}"
    if not 0 < timeout <= MAX_TIMEOUT:
        return f"seconds, more than 0 and at most {MAX_TIMEOUT:g}, got {timeout!r}"
    return None


def _check_format(chat_format):
    if chat_format not in FORMATS:
        return f"unknown format {chat_format!r}: one of {', '.join(FORMATS)}"
    return None


def _check_username(username):
    if not isinstance(username, str) or not username.strip():
        return "a name to post as"
    if len(username) > USERNAME_LIMIT or "\n" in username:
        return f"one line of at most {USERNAME_LIMIT} characters"
    return None


CHECKS = {
    "to": _check_to,
    "url": _check_url,
    "secret": _check_secret,
    "headers": _check_headers,
    "timeout": _check_timeout,
    "format": _check_format,
    "username": _check_username,
}


# -- signatures ---------------------------------------------------------------


def sign(secret, timestamp, body):
    """The `Croniq-Signature` value: `t=<unix seconds>,v1=<hex HMAC-SHA256>`."""
    timestamp = _unix(timestamp)
    return f"t={timestamp},v1={_digest(secret, timestamp, body)}"


def verify(secret, header, body, now, tolerance=300):
    """Whether `header` signs `body` with `secret`, within `tolerance` seconds
    of `now`: what a receiver checks. Several v1 values may be given (a
    secret being rotated); one match is enough."""
    timestamp, signatures = None, []
    for part in (header or "").split(","):
        key, _, value = part.strip().partition("=")
        if key == "t":
            timestamp = value
        elif key == "v1":
            signatures.append(value)
    try:
        timestamp = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(_unix(now) - timestamp) > tolerance:
        return False
    expected = _digest(secret, timestamp, body).encode()
    return any(hmac.compare_digest(expected, given.encode()) for given in signatures)


def _digest(secret, timestamp, body):
    secret = secret.encode() if isinstance(secret, str) else secret
    body = body.encode() if isinstance(body, str) else body
    return hmac.new(secret, b"%d." % timestamp + body, hashlib.sha256).hexdigest()


def _unix(now):
    if isinstance(now, datetime):
        if now.tzinfo is None:
            raise ValueError("now must be a timezone-aware datetime")
        return int(now.timestamp())
    return int(now)


# -- rendering ----------------------------------------------------------------


def render(kind, config, message, now):
    """(body bytes, headers) of the HTTP request for a webhook or chat channel.

    Secrets are resolved here, at delivery time: ValueError when one is unset.
    """
    require_valid(kind, config)
    _require_message(message)
    if kind == "email":
        raise ValueError("kind: an email channel is sent with email_message, not over HTTP")
    return _render(kind, config, message, now)


def _render(kind, config, message, now):
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


def _require_message(message):
    missing = [key for key in ("id", "event", "summary", "url") if key not in message]
    if missing:
        raise ValueError(f"message: missing {', '.join(missing)}")


def chat_text(message, limit=None):
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


def email_message(config, message, from_email):
    """The plain-text email of a notification, addressed to the channel's `to`."""
    _require_message(message)
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


def email_subject(message):
    """`[Croniq] <summary>` on one line, cut at a word near SUBJECT_LIMIT."""
    summary = " ".join(str(message["summary"]).split())
    subject = f"[Croniq] {summary}"
    if len(subject) <= SUBJECT_LIMIT:
        return subject
    cut = subject[: SUBJECT_LIMIT - 1]
    if " " in cut[SUBJECT_LIMIT // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:-") + "…"


def email_lines(message):
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


# -- sending ------------------------------------------------------------------


def send(kind, config, message, now, timeout=None):
    """Deliver `message` on the channel: a Result, never an exception for a
    failed delivery. ValueError for a bad config or an unset secret.

    `timeout` (seconds) overrides the channel's own; email falls back to
    EMAIL_TIMEOUT, then to DEFAULT_TIMEOUT.
    """
    require_valid(kind, config)
    _require_message(message)
    if kind == "email":
        timeout = timeout or mail.configured_timeout() or DEFAULT_TIMEOUT
        return _send_email(config, message, timeout)
    timeout = timeout or config.get("timeout") or DEFAULT_TIMEOUT
    body, headers = _render(kind, config, message, now)
    url = secrets.expand(config["url"])
    return _post(url, body, headers, timeout, hidden=_secret_values(config))


# requests reads the whole environment on every call: for proxy variables
# (twice) and NO_PROXY, a CA bundle, a .netrc; in a burst, 0.4 ms of a
# delivery's 3 ms of CPU (more, the more variables a container sets). The
# variables that matter to an http(s) URL are looked up here instead, and
# with a proxy or a .netrc to honour, requests reads the environment as
# ever.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")
CA_BUNDLE_VARIABLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
NETRC_FILES = ("~/.netrc", "~/_netrc")


def _session():
    """A requests Session for one delivery: one that does not read the
    environment when nothing in it concerns the request, else requests'
    own. Fresh each time, as `requests.post` makes one: no cookie of one
    receiver's reaches the next delivery."""
    session = egress.guard(requests.Session())
    if not _environment_matters():
        session.trust_env = False
        session.verify = next(
            (os.environ[name] for name in CA_BUNDLE_VARIABLES if os.environ.get(name)), True
        )
    return session


def _environment_matters():
    """A proxy variable or a .netrc that requests would honour is set."""
    for name in PROXY_VARIABLES:
        if os.environ.get(name) or os.environ.get(name.upper()):
            return True
    if os.environ.get("NETRC"):
        return True
    return any(os.path.exists(os.path.expanduser(path)) for path in NETRC_FILES)


def _post(url, body, headers, timeout, hidden):
    """One POST, over by `timeout` seconds however slowly the receiver
    answers. Only the status is kept of an answer: its body would show
    whoever reads the delivery log what the receiver said."""
    started = time.perf_counter()
    try:
        # Redirects are not followed: a POST turned into a GET loses its body.
        with (
            egress.Deadline(timeout) as deadline,
            _session() as session,
            session.post(
                url, data=body, headers=headers, timeout=timeout, stream=True, allow_redirects=False
            ) as response,
        ):
            status = response.status_code
    except Exception as error:  # a failed delivery is a result, whatever broke
        described = _timed_out(timeout) if deadline.passed else _describe(error, timeout)
        return Result(False, None, _hide(described, hidden), _since(started))
    if 200 <= status < 300:
        return Result(True, status, "", _since(started))
    error = f"HTTP {status}"
    if 300 <= status < 400:
        error = f"HTTP {status}: a redirect, not followed (set the final URL)"
    return Result(False, status, error, _since(started))


def _timed_out(timeout):
    return f"timed out after {float(timeout)}s"


def _describe(error, timeout):
    """A short text for the delivery log. Never the exception's own text: it
    names the URL, which may hold a secret."""
    if isinstance(error, requests.Timeout | urllib3.exceptions.TimeoutError | TimeoutError):
        return _timed_out(timeout)
    causes = list(_causes(error))
    refused = [cause for cause in causes if isinstance(cause, egress.ForbiddenAddress)]
    if refused:
        return str(refused[0])  # written by egress: no URL, no address
    if any(isinstance(cause, ConnectionRefusedError) for cause in causes):
        return "connection refused"
    if any(isinstance(cause, urllib3.exceptions.NameResolutionError) for cause in causes):
        return "cannot resolve the host name"
    if isinstance(error, requests.exceptions.SSLError):
        return "TLS handshake failed (certificate or protocol)"
    oserrors = [cause for cause in causes if isinstance(cause, OSError) and cause.strerror]
    if oserrors:
        return f"connection failed: {oserrors[-1].strerror}"
    if isinstance(error, requests.ConnectionError):
        return "connection failed"
    return f"request failed: {type(error).__name__}"


def _causes(error):
    """`error` and what it wraps: requests -> urllib3 -> the socket's OSError."""
    seen, pending = set(), [error]
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending += [current.__cause__, current.__context__, getattr(current, "reason", None)]
        pending += list(current.args[:1])


def _secret_values(config):
    """The resolved secrets of a channel, to keep them out of error texts."""
    texts = [config.get("url", ""), *config.get("headers", {}).values()]
    values = [secrets.expand(text) for text in texts if text.startswith(secrets.FILE_PREFIX)]
    for text in texts:
        values += [secrets.resolve(f"${{{name}}}") for name in secrets.names_in(text)]
    if config.get("secret"):
        values.append(secrets.resolve(config["secret"]))
    return [value for value in values if len(value) >= NO_SECRET_BELOW]


def _hide(text, hidden):
    for value in hidden:
        text = text.replace(value, "[secret]")
    return text


def _since(started):
    return time.perf_counter() - started


def _send_email(config, message, timeout):
    started = time.perf_counter()
    try:
        email = email_message(config, message, settings.DEFAULT_FROM_EMAIL)
        sent = mail.connection(timeout).send_messages([email])
    except smtplib.SMTPRecipientsRefused as error:
        code, reply = next(iter(error.recipients.values()))
        refused = ", ".join(error.recipients)
        text = f"SMTP {code}: refused {refused}: {_smtp_text(reply)}"
        return Result(False, code, text, _since(started))
    except smtplib.SMTPResponseException as error:
        text = f"SMTP {error.smtp_code}: {_smtp_text(error.smtp_error)}"
        return Result(False, error.smtp_code, text, _since(started))
    except Exception as error:  # a failed delivery is a result, whatever broke
        return Result(False, None, _describe_smtp(error, timeout), _since(started))
    if not sent:
        return Result(False, None, "the email backend sent nothing", _since(started))
    return Result(True, None, "", _since(started))


def _smtp_text(reply):
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return " ".join(text.split())[:ERROR_BODY_LIMIT]


def _describe_smtp(error, timeout):
    # smtplib turns a read timeout into SMTPServerDisconnected: look inside.
    if any(isinstance(cause, TimeoutError) for cause in _causes(error)):
        return f"timed out after {float(timeout)}s"
    if isinstance(error, ConnectionRefusedError):
        return "connection refused"
    if isinstance(error, smtplib.SMTPServerDisconnected):
        return "the SMTP server closed the connection"
    if isinstance(error, OSError) and error.strerror:
        return f"connection failed: {error.strerror}"
    return f"{type(error).__name__}: {_smtp_text(str(error))}"
