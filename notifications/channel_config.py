"""A channel's config (docs/design.md §9): the kinds, their settings, and
`validate`, which lists what is wrong with one. Secret references are
checked here and resolved only at delivery (`notifications.secrets`).
"""

import re
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

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
USERNAME_LIMIT = 80  # Discord's limit; Slack and Mattermost take as much


def validate(kind: str, config: Any) -> dict[str, str]:
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


def require_valid(kind: str, config: Any) -> None:
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
