"""Delivering one notification on one channel (docs/design.md §9): email, signed
webhooks, and chat webhooks (Slack, Mattermost, Rocket.Chat, Teams, Discord).

No database here: a channel is a kind and a config dict, a notification is
the §9 body dict (plus optional `details` lines). `validate` lists what is
wrong with a config (`channel_config`), `payloads` builds the HTTP request
or the email, `send` delivers it and returns a `Result`. A failed delivery
is a result, never an exception; only a bad config or an unset secret raises
ValueError, for the caller to record.
"""

import os
import smtplib
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import requests
import urllib3
from django.conf import settings

from core import mail
from notifications import egress, payloads, secrets
from notifications.channel_config import DEFAULT_TIMEOUT, require_valid

# Importable from here, as most callers do: a channel's config is checked and
# a webhook's signature verified next to where it is sent.
from notifications.channel_config import validate as validate
from notifications.signatures import sign as sign
from notifications.signatures import verify as verify

ERROR_BODY_LIMIT = 200  # of an SMTP server's reply (the server is Croniq's own setting)
NO_SECRET_BELOW = 4  # shorter values are not scrubbed from error texts: too common


@dataclass(frozen=True)
class Result:
    """The outcome of one delivery attempt, as the delivery log shows it."""

    ok: bool
    status_code: int | None = None  # HTTP status, or the SMTP code of a refusal
    error: str = ""
    latency: float = 0.0  # seconds


# -- sending ------------------------------------------------------------------


def send(
    kind: str,
    config: dict[str, Any],
    message: dict[str, Any],
    now: datetime | float,
    timeout: float | None = None,
) -> Result:
    """Deliver `message` on the channel: a Result, never an exception for a
    failed delivery. ValueError for a bad config or an unset secret.

    `timeout` (seconds) overrides the channel's own; email falls back to
    EMAIL_TIMEOUT, then to DEFAULT_TIMEOUT.
    """
    require_valid(kind, config)
    payloads.require_message(message)
    if kind == "email":
        timeout = timeout or mail.configured_timeout() or DEFAULT_TIMEOUT
        return _send_email(config, message, timeout)
    timeout = timeout or config.get("timeout") or DEFAULT_TIMEOUT
    body, headers = payloads.build_request(kind, config, message, now)
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
        values += [secrets.resolve(f"${{secret:{name}}}") for name in secrets.store_names_in(text)]
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
        email = payloads.email_message(config, message, settings.DEFAULT_FROM_EMAIL)
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
