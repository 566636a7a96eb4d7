"""What an item of an apply file may say, and how it reads: checked field
values for Calendar, CalendarPeriod and Job, with errors that name the item
and field ("calendars[0].exclude[2].start: ..."), and the comparable state
of a row that tells whether applying changes it. The fields each section
takes are in scheduler.apply.fields.
"""

import datetime as dt
import re
import urllib.parse
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug

from calendars.models import WEEKDAYS, CalendarPeriod
from calendars.validators import text_problems, validate_timezone
from croniq_runner.sizes import SizeError, parse_size, shown
from scheduler.apply.fields import (
    CONTAINER_KEYS,
    HOLIDAY_KEYS,
    HTTP_KEYS,
    PERIOD_FIELDS,
    YAML_PATHS,
    field_names,
)
from scheduler.jobs import requires, tags
from scheduler.jobs.cron import EVERY_RE, ScheduleError, parse_schedule
from scheduler.jobs.models import MAX_AT, MAX_EXIT_CODE, MAX_SCHEDULES, MAX_STDIN, PARAMETER_RE
from scheduler.jobs.schedules.union import parse_instant
from scheduler.models import Job, validate_parameters
from vault import references, store
from vault.models import DEFAULT_PROJECT

# Values quoted in errors are cut to this many characters, and each error to
# MAX_ERROR_CHARS: an answer stays small whatever the document holds.
QUOTED_CHARS = 80
MAX_ERROR_CHARS = 500
# An http job's request (docs/design.md §15). It travels in every
# assignment of the job, as `stdin` does, so its body has stdin's bound.
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
MAX_HTTP_BODY = MAX_STDIN
MAX_URL = 8192
# The largest timeout the job's own column holds (a PositiveIntegerField).
MAX_REQUEST_TIMEOUT = 2_147_483_647
# An HTTP header's name: a token (RFC 9110 §5.1).
HEADER_NAME_RE = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# A container job's image (docs/design.md §15), as docker and podman name
# one: never starting with "-", which the engine would read as an option.
IMAGE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*")
MAX_IMAGE = 512
PULL_POLICIES = ("missing", "always", "never")
NETWORKS = ("none", "bridge", "host")
# A container's args and env travel in every assignment of the job, as
# `stdin` does: together they have stdin's bound.
MAX_CONTAINER_TEXT = MAX_STDIN


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """repr(value), cut to `limit` characters with an ellipsis."""
    return shortened(repr(value), limit)


def shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ApplyError(Exception):
    def __init__(self, errors) -> None:
        errors = errors if isinstance(errors, list) else [errors]
        self.errors = [shortened(e, MAX_ERROR_CHARS) for e in errors]
        super().__init__("; ".join(self.errors))


def string_mapping(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ApplyError(f"{where}: expected a mapping of names to values")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def job_env(where: str, value: Any, project: str | None = DEFAULT_PROJECT) -> dict[str, str]:
    """A job's `env`: a mapping of text whose `${secret:NAME}` references
    each name a secret of the job's `project` (docs/design.md §11: a job
    reads its own project's secrets alone; None: not checked here, the
    caller checks once it knows the project). ApplyError names the variable
    (`jobs[0].env.DB_PASSWORD: unknown secret "db-password"`)."""
    env = string_mapping(where, value)
    secret_problems(where, env, project)
    return env


def secret_problems(where: str, texts: dict[str, str], project: str | None) -> None:
    """ApplyError naming each text of `texts` (by its path under `where`)
    whose `${secret:NAME}` is not a secret of `project` (None: unchecked)."""
    if project is None or not references.has_reference(texts):
        return
    found = references.problems(texts, store.names(project))
    if found:
        raise ApplyError([f"{where}.{path}: {why}" for path, why in found])


def http_request(
    where: str, value: Any, job_timeout: Any = None, project: str | None = DEFAULT_PROJECT
) -> dict[str, Any]:
    """An http job's `http` (docs/design.md §15) as stored: every field set,
    its defaults filled in; {} for none. `job_timeout`: the job's, which
    bounds the request's own. Its url, header values and body may hold
    `${secret:NAME}` references, each naming a stored secret. ApplyError
    names the field (`jobs[0].http.url: ...`)."""
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise ApplyError(f"{where}: expected a mapping {{url, method, headers, body, ...}}")
    unknown_fields(where, value, HTTP_KEYS)
    request = {
        "method": http_method(f"{where}.method", value.get("method", "GET")),
        "url": http_url(f"{where}.url", value.get("url")),
        "headers": http_headers(f"{where}.headers", value.get("headers")),
        "body": http_body(f"{where}.body", value.get("body")),
        "expect_status": status_codes(f"{where}.expect_status", value.get("expect_status")),
        "timeout": None,
    }
    if value.get("timeout") is not None:
        request["timeout"] = request_timeout(f"{where}.timeout", value["timeout"], job_timeout)
    secret_problems(where, references.request_texts(request), project)
    return request


def http_method(where: str, value: Any) -> str:
    method = value.upper() if isinstance(value, str) else value
    if method not in HTTP_METHODS:
        raise ApplyError(f"{where}: {quoted(value)} is not one of {', '.join(HTTP_METHODS)}")
    return method


def http_url(where: str, value: Any) -> str:
    if value is None or value == "":
        raise ApplyError(f"{where}: required: the URL to request (http:// or https://)")
    if not isinstance(value, str):
        raise ApplyError(f"{where}: expected a URL, got {quoted(value)}")
    if len(value) > MAX_URL:
        raise ApplyError(f"{where}: at most {MAX_URL} characters (got {len(value)})")
    if any(c.isspace() or not c.isprintable() for c in value):
        raise ApplyError(f"{where}: a URL holds no spaces or control characters")
    parts = urllib.parse.urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ApplyError(
            f"{where}: {quoted(value)} is not a URL starting http:// or https:// with a host"
        )
    try:
        parts.port  # noqa: B018 (it raises on a port that is no number)
    except ValueError:
        if "${secret:" not in parts.netloc:  # a reference's colon is no port
            raise ApplyError(f"{where}: {quoted(value)} has a port that is not a number") from None
    return value


def http_headers(where: str, value: Any) -> dict[str, str]:
    headers = string_mapping(where, {} if value is None else value)
    seen: dict[str, str] = {}
    for name, text in headers.items():
        if not HEADER_NAME_RE.fullmatch(name):
            raise ApplyError(
                f"{where}: {quoted(name)} is not a header name "
                "(letters, digits and !#$%&'*+-.^_`|~)"
            )
        if name.lower() in seen:
            raise ApplyError(
                f"{where}.{name}: set twice (as {seen[name.lower()]}): header names are "
                "the same whatever their case"
            )
        seen[name.lower()] = name
        if "\r" in text or "\n" in text:
            raise ApplyError(f"{where}.{name}: a header's value is one line")
        if text[:1].isspace():
            raise ApplyError(f"{where}.{name}: a header's value does not start with a space")
    return headers


def http_body(where: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ApplyError(f"{where}: expected text, got {quoted(value)}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_HTTP_BODY:
        raise ApplyError(f"{where}: at most {MAX_HTTP_BODY} bytes (got {size})")
    return value


def status_codes(where: str, value: Any) -> list[int]:
    """The statuses that make a run succeed, sorted; [] is any 2xx."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of HTTP status codes like [200, 204]")
    for index, code in enumerate(value):
        if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
            raise ApplyError(f"{where}[{index}]: {quoted(code)} is not a status code (100-599)")
    return sorted(set(value))


def request_timeout(where: str, value: Any, job_timeout: Any) -> int:
    timeout = seconds(where, value, least=1)
    if isinstance(job_timeout, int) and not isinstance(job_timeout, bool) and job_timeout > 0:
        if timeout > job_timeout:
            raise ApplyError(f"{where}: at most the job's timeout ({job_timeout}s), got {timeout}")
    elif timeout > MAX_REQUEST_TIMEOUT:
        raise ApplyError(f"{where}: at most {MAX_REQUEST_TIMEOUT} seconds, got {timeout}")
    return timeout


def size(where: str, value: Any, least: int, most: int) -> int:
    """A size in bytes: a number, or a text like `64MiB` (croniq_runner.sizes),
    from `least` to `most`; ApplyError naming `where` otherwise."""
    try:
        found = parse_size(value)
    except SizeError as e:
        raise ApplyError(f"{where}: {e}") from None
    if not least <= found <= most:
        raise ApplyError(
            f"{where}: from {shown(least)} to {shown(most)}, got {shown(found)} ({quoted(value)})"
        )
    return found


def exit_codes(where: str, value: Any) -> list[int]:
    """A job's `success_exit_codes`, sorted and distinct; [] is 0 alone."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of exit codes like [0, 3]")
    for index, code in enumerate(value):
        if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= MAX_EXIT_CODE:
            raise ApplyError(
                f"{where}[{index}]: {quoted(code)} is not an exit code (0-{MAX_EXIT_CODE})"
            )
    return sorted(set(value))


def container_spec(where: str, value: Any, project: str | None = DEFAULT_PROJECT) -> dict[str, Any]:
    """A container job's `container` (docs/design.md §15) as stored: every
    field set, its defaults filled in; {} for none. Its env values may hold
    `${secret:NAME}` references, each naming a stored secret; its args may
    not (they show in the runner machine's process list). ApplyError names
    the field (`jobs[0].container.image: ...`)."""
    if value is None or value == {}:
        return {}
    if not isinstance(value, dict):
        raise ApplyError(f"{where}: expected a mapping {{image, args, env, pull, network}}")
    unknown_fields(where, value, CONTAINER_KEYS)
    spec = {
        "image": container_image(f"{where}.image", value.get("image")),
        "args": container_args(f"{where}.args", value.get("args")),
        "env": container_env(f"{where}.env", value.get("env"), project),
        "pull": one_of(f"{where}.pull", value.get("pull") or "missing", PULL_POLICIES),
        "network": None,
    }
    if value.get("network") is not None:
        spec["network"] = one_of(f"{where}.network", value["network"], NETWORKS)
    texts = [*spec["args"], *(f"{k}={v}" for k, v in spec["env"].items())]
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if size > MAX_CONTAINER_TEXT:
        raise ApplyError(
            f"{where}: at most {MAX_CONTAINER_TEXT} bytes of args and env together (got {size})"
        )
    return spec


def container_image(where: str, value: Any) -> str:
    if value is None or value == "":
        raise ApplyError(f"{where}: required: the image to run (like alpine:3.20)")
    if not isinstance(value, str):
        raise ApplyError(f"{where}: expected an image reference, got {quoted(value)}")
    if len(value) > MAX_IMAGE or not IMAGE_RE.fullmatch(value):
        raise ApplyError(
            f"{where}: {quoted(value)} is not an image reference (like alpine:3.20 or "
            "registry.example.com/team/report@sha256:...)"
        )
    return value


def container_args(where: str, value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of text, like [python, report.py]")
    args = []
    for index, arg in enumerate(value):
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise ApplyError(f"{where}[{index}]: expected text, got {quoted(arg)}")
        text = str(arg)
        if "${secret:" in text:
            raise ApplyError(
                f"{where}[{index}]: a ${{secret:NAME}} may stand only in container.env "
                "(the arguments show in the runner machine's process list)"
            )
        args.append(text)
    return args


def container_env(where: str, value: Any, project: str | None = DEFAULT_PROJECT) -> dict[str, str]:
    """The container's environment: names of letters, digits and `_`, values
    of one line (the engine reads them a line a variable), references
    naming stored secrets."""
    env = string_mapping(where, {} if value is None else value)
    for name, text in env.items():
        if not PARAMETER_RE.fullmatch(name):
            raise ApplyError(
                f"{where}: {quoted(name)} is not an environment variable name (letters, "
                "digits and _, not starting with a digit)"
            )
        if any(c in text for c in "\r\n\0"):
            raise ApplyError(
                f"{where}.{name}: a value is one line (the engine reads the environment "
                "a line a variable)"
            )
    secret_problems(where, env, project)
    return env


def one_of(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ApplyError(f"{where}: {quoted(value)} is not one of {', '.join(choices)}")
    return value


def string_list(where: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ApplyError(f"{where}: expected a list of non-empty strings")
    return value


def requirement_list(where: str, value: Any) -> list[dict[str, Any]]:
    """A job's `requires`: [{job, succeeded_within}], each duration as whole
    seconds; ApplyError naming the entry and field (`jobs[0].requires[1].job`)."""
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of {{job, succeeded_within}}")
    if len(value) > requires.MAX_REQUIRES:
        raise ApplyError(f"{where}: at most {requires.MAX_REQUIRES} jobs, got {len(value)}")
    found = []
    for index, entry in enumerate(value):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise ApplyError(f"{at}: expected {{job, succeeded_within}}")
        unknown_fields(at, entry, set(requires.KEYS))
        job = entry.get("job")
        if not isinstance(job, str) or not job:
            raise ApplyError(f"{at}.job: required: the name of a job")
        if job in (e["job"] for e in found):
            raise ApplyError(f"{at}.job: {quoted(job)} is listed twice")
        if entry.get("succeeded_within") is None:
            raise ApplyError(f'{at}.succeeded_within: required: a duration like "2h"')
        within = seconds(f"{at}.succeeded_within", entry["succeeded_within"], least=1)
        if within > requires.MAX_WINDOW:
            raise ApplyError(
                f"{at}.succeeded_within: at most {requires.MAX_WINDOW} seconds (366 days), "
                f"got {within}"
            )
        found.append({"job": job, "succeeded_within": within})
    return found


def schedule_list(where: str, value: Any, key: str) -> list[Any]:
    """A job's `schedules`: each a schedule text, or {cron, timezone};
    ApplyError naming the entry (`jobs[0].schedules[1].timezone: ...`).
    `key`: the job's name, for the H forms."""
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of schedules or {{cron, timezone}}")
    if len(value) > MAX_SCHEDULES:
        raise ApplyError(f"{where}: at most {MAX_SCHEDULES} schedules, got {len(value)}")
    found: list[Any] = []
    for index, entry in enumerate(value):
        at = f"{where}[{index}]"
        text, tz = entry, None
        if isinstance(entry, dict):
            unknown_fields(at, entry, {"cron", "timezone"})
            text, tz = entry.get("cron"), entry.get("timezone")
            at_text = f"{at}.cron"
        else:
            at_text = at
        if not isinstance(text, str) or not text.strip():
            raise ApplyError(f"{at_text}: expected a schedule, e.g. '30 2 * * *' or @daily")
        try:
            parse_schedule(text, key=key)
        except ScheduleError as e:
            raise ApplyError(f"{at_text}: {e}") from None
        if not isinstance(entry, dict):
            found.append(text)
            continue
        if tz is not None:
            try:
                validate_timezone(tz if isinstance(tz, str) else "")
            except ValidationError:
                raise ApplyError(
                    f"{at}.timezone: {quoted(tz)} is not a known IANA timezone "
                    "(for example Europe/Berlin or UTC)"
                ) from None
        found.append({"cron": text, "timezone": tz} if tz else {"cron": text})
    return found


def instant(where: str, value: Any) -> dt.datetime:
    """An ISO 8601 instant with its offset, in UTC; ApplyError naming `where`."""
    try:
        return parse_instant(value)
    except ScheduleError as e:
        raise ApplyError(f"{where}: {e}") from None


def one_shot_instants(where: str, value: Any, now: dt.datetime, kept: list[Any]) -> list[str]:
    """A job's `at`: sorted, distinct UTC texts. An instant not among those
    the job already has (`kept`) must be after `now`: a document applied
    again once its instants passed stays valid. Those of `kept` gone by stay
    with the job whether the document lists them or not (they have fired,
    or were missed): so an export, which leaves them out, applies to its
    own database as no change."""
    if not isinstance(value, list):
        raise ApplyError(f"{where}: expected a list of ISO 8601 instants")
    if len(value) > MAX_AT:
        raise ApplyError(f"{where}: at most {MAX_AT} instants, got {len(value)}")
    stored = set()
    for text in kept or []:
        try:
            stored.add(parse_instant(text))
        except ScheduleError:
            continue  # a stored value no longer read: not kept
    found = set()
    for index, text in enumerate(value):
        moment = instant(f"{where}[{index}]", text)
        if moment <= now and moment not in stored:
            raise ApplyError(
                f"{where}[{index}]: {utc_text(moment)} is past (now is {utc_text(now)}): "
                "a new one-shot instant must be in the future"
            )
        found.add(moment)
    found.update(moment for moment in stored if moment <= now)
    return [utc_text(moment) for moment in sorted(found)]


def tag_list(where: str, value: Any) -> list[str]:
    """A job's `tags` (scheduler.jobs.tags); ApplyError naming the entry
    (`jobs[0].tags[1]: ...`)."""
    found = tags.problem(value)
    if found is not None:
        at, message = found
        raise ApplyError(f"{where}{at}: {message}")
    return value


def parameter_names(where: str, value: Any) -> list[str]:
    """A job's `parameters`: env names a manual trigger may set."""
    try:
        validate_parameters(value)
    except ValidationError as e:
        raise ApplyError(f"{where}: {e.messages[0]}") from None
    return value


def whole_number(where: str, value: Any, least: int) -> int:
    """A whole number of at least `least`; ApplyError naming `where` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplyError(f"{where}: expected a whole number, got {quoted(value)}")
    if value < least:
        raise ApplyError(f"{where}: must be at least {least}, got {value}")
    return value


def seconds(where: str, value: Any, least: int = 0) -> int:
    """A duration in whole seconds: a number (`900`) or `@every`'s grammar
    (`"30m"`, `"1h30m"`, `"2d"`, `"45s"`); ApplyError unless it is at least `least`."""
    if isinstance(value, str) and value.strip():
        text = value.strip().lower()
        if text.removeprefix("-").isdigit():
            value = int(text)
        else:
            match = EVERY_RE.match(text)
            if not match:
                raise ApplyError(
                    f"{where}: {quoted(value)} is not a duration: seconds (900) or "
                    'a text like "30s", "15m", "1h30m", "2d"'
                )
            days, hours, minutes, secs = (int(g or 0) for g in match.groups())
            value = ((days * 24 + hours) * 60 + minutes) * 60 + secs
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApplyError(
            f'{where}: expected whole seconds (900) or a duration like "15m", got {quoted(value)}'
        )
    if value < least:
        raise ApplyError(f"{where}: must be at least {least} second(s), got {value}")
    return value


def order_by_base(indexed: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """Calendars whose base is in the file come after their base."""
    by_name = {item["name"]: (where, item) for where, item in indexed}
    ordered, placed = [], set()

    def place(name, trail=()):
        if name in placed or name not in by_name:
            return
        if name in trail:
            raise ApplyError(f"{by_name[name][0]}.base: cycle through {' -> '.join(trail)}")
        base = by_name[name][1].get("base")
        if base:
            place(base, (*trail, name))
        placed.add(name)
        ordered.append(by_name[name])

    for name in by_name:
        place(name)
    return ordered


def unknown_fields(where: str, mapping: dict[str, Any], known: set[str]) -> None:
    unknown = set(mapping) - known
    if unknown:
        raise ApplyError(f"{where}: unknown field(s): {', '.join(sorted(map(str, unknown)))}")


def parse_time(where: str, value: Any) -> dt.time:
    try:
        return dt.time.fromisoformat(str(value))
    except ValueError:
        raise ApplyError(f'{where}: {quoted(value)} is not a time like "06:00"') from None


def calendar_values(where: str, item: dict[str, Any], calendar_named: Any) -> dict[str, Any]:
    holidays = item.get("holidays") or {}
    if not isinstance(holidays, dict):
        raise ApplyError(f"{where}.holidays: expected {{country, subdivision?, categories?}}")
    unknown_fields(f"{where}.holidays", holidays, HOLIDAY_KEYS)
    window = item.get("daily_window") or {}
    if not isinstance(window, dict) or (window and set(window) != {"start", "end"}):
        raise ApplyError(f'{where}.daily_window: expected {{start: "HH:MM", end: "HH:MM"}}')
    weekdays = item.get("weekdays", list(WEEKDAYS))
    if not isinstance(weekdays, list):
        raise ApplyError(f"{where}.weekdays: expected a list like [mon, tue]")
    base = item.get("base")
    base_calendar = None
    if base:
        base_calendar = calendar_named(base)
        if base_calendar is None:
            raise ApplyError(f"{where}.base: no calendar named {quoted(base)}")
    return {
        "description": item.get("description") or "",
        "timezone": item.get("timezone") or "UTC",
        "weekdays": [str(d).lower() for d in weekdays],
        "holiday_country": str(holidays.get("country") or ""),
        "holiday_subdivision": str(holidays.get("subdivision") or ""),
        "holiday_categories": list(holidays.get("categories") or []),
        "window_start": parse_time(f"{where}.daily_window.start", window["start"])
        if window
        else None,
        "window_end": parse_time(f"{where}.daily_window.end", window["end"]) if window else None,
        "base": base_calendar,
    }


def periods_of(where: str, item: dict[str, Any]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    for kind in (CalendarPeriod.EXCLUDE, CalendarPeriod.INCLUDE):
        periods = item.get(kind) or []
        if not isinstance(periods, list):
            raise ApplyError(f"{where}.{kind}: expected a list of {{start, end, label?}}")
        for index, period in enumerate(periods):
            yield kind, index, period


def parse_moment(where: str, value: Any) -> dt.date | dt.datetime:
    """A date (whole day) or an aware datetime."""
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        return value
    else:
        text = str(value)
        try:
            return dt.date.fromisoformat(text)
        except ValueError:
            pass
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            raise ApplyError(
                f"{where}: {quoted(value)} is not a date or an ISO 8601 datetime"
            ) from None
    if moment.tzinfo is None:
        raise ApplyError(f"{where}: datetime {quoted(value)} needs an offset, e.g. +01:00 or Z")
    return moment


def period_values(where: str, kind: str, period: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(period, dict) or not {"start", "end"} <= set(period):
        raise ApplyError(f"{where}: expected {{start, end, label?}}")
    unknown_fields(where, period, field_names(PERIOD_FIELDS))
    start = parse_moment(f"{where}.start", period["start"])
    end = parse_moment(f"{where}.end", period["end"])
    if isinstance(start, dt.datetime) != isinstance(end, dt.datetime):
        raise ApplyError(f"{where}: start and end must both be dates or both datetimes")
    if start > end or (isinstance(start, dt.datetime) and start == end):
        raise ApplyError(f"{where}: start {period['start']} is after end {period['end']}")
    values = {"kind": kind, "label": str(period.get("label") or "")}
    if isinstance(start, dt.datetime):
        values.update(start_at=start, end_at=end)
    else:
        values.update(start_date=start, end_date=end)
    return values


def utc_text(instant: dt.datetime) -> str:
    """An instant as UTC text: the database gives UTC back, a document may
    write the same instant with another offset (`08:00+02:00`), and the two
    must compare equal or every apply would rewrite the period."""
    return instant.astimezone(dt.UTC).isoformat()


def calendar_state(calendar: Any, periods: list[Any] | None = None) -> dict[str, Any]:
    """A comparable, JSON-friendly picture of a calendar and its periods."""
    if periods is None:
        periods = list(calendar.periods.all()) if calendar.pk else []
    return {
        "description": calendar.description,
        "timezone": calendar.timezone,
        "weekdays": list(calendar.weekdays),
        "holidays": [
            calendar.holiday_country,
            calendar.holiday_subdivision,
            list(calendar.holiday_categories),
        ],
        "daily_window": [
            calendar.window_start.isoformat() if calendar.window_start else None,
            calendar.window_end.isoformat() if calendar.window_end else None,
        ],
        "base": calendar.base.name if calendar.base is not None else None,
        "managed_by": calendar.managed_by,
        "managed_source": calendar.managed_source,
        "periods": sorted(
            [
                p.kind,
                str(p.start_date or utc_text(p.start_at)),
                str(p.end_date or utc_text(p.end_at)),
                p.label,
            ]
            for p in periods
        ),
    }


def job_state(job: Job) -> dict[str, Any]:
    return {
        "description": job.description,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "kind": job.kind,
        "command": job.command,
        # The request of an http job; none for the other kinds.
        "http": dict(job.http) if job.http else None,
        # What a container job runs; none for the other kinds.
        "container": dict(job.container) if job.container else None,
        "env": dict(job.env),
        "max_output": job.max_output,
        "on_max_output": job.on_max_output,
        "max_memory": job.max_memory,
        "max_cpu_seconds": job.max_cpu_seconds,
        "success_exit_codes": list(job.success_exit_codes or []),
        "stdin": job.stdin,
        "run_as": job.run_as,
        "run_on_register": job.run_on_register,
        "schedules": list(job.schedules or []),
        "at": list(job.at or []),
        "not_before": utc_text(job.not_before) if job.not_before else None,
        "not_after": utc_text(job.not_after) if job.not_after else None,
        "max_runs": job.max_runs,
        "webhook": job.webhook,
        "webhook_secret": job.webhook_secret,
        "calendar": job.calendar.name if job.calendar is not None else None,
        "calendar_policy": job.calendar_policy,
        "labels": list(job.labels),
        "tags": list(job.tags or []),
        "singleton": job.singleton,
        "overlap": job.overlap,
        "max_concurrent": job.max_concurrent,
        "max_queue": job.max_queue,
        "jitter": job.jitter,
        "run_on": job.run_on,
        "stagger": job.stagger,
        "concurrency_group": (
            job.concurrency_group.name if job.concurrency_group is not None else None
        ),
        "timeout": job.timeout,
        "retries": job.retries,
        "retry_backoff": job.retry_backoff,
        "misfire_policy": job.misfire_policy,
        "enabled": job.enabled,
        "owner": job.owner,
        "max_duration": job.max_duration,
        "min_duration": job.min_duration,
        "managed_by": job.managed_by,
        "managed_source": job.managed_source,
        "parameters": list(job.parameters),
        "on_success": list(job.on_success or []),
        "on_failure": list(job.on_failure or []),
        "requires": [
            {"job": need.get("job"), "succeeded_within": need.get("succeeded_within")}
            for need in job.requires or []
        ],
        "requires_policy": job.requires_policy,
        "requires_timeout": job.requires_timeout,
        "maintenance": job.maintenance,
        "pause_after_failures": job.pause_after_failures,
    }


def group_state(group: Any) -> dict[str, Any]:
    return {
        "max_concurrent": group.max_concurrent,
        "description": group.description,
        "managed_by": group.managed_by,
        "managed_source": group.managed_source,
    }


def overlap_of(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A job's `singleton` and `overlap` after a partial change `patch`: the
    one the patch names wins, the other follows (singleton is overlap skip)."""
    if "overlap" in patch and "singleton" not in patch:
        return {"singleton": patch["overlap"] == Job.SKIP}
    if "singleton" in patch and "overlap" not in patch:
        if patch["singleton"] is True:
            return {"overlap": Job.SKIP}
        if patch["singleton"] is False and current.get("overlap") == Job.SKIP:
            return {"overlap": Job.ALLOW}
    return {}


def describe_errors(where: str, error: ValidationError) -> list[str]:
    """'jobs[3].schedule: ...' lines from a ValidationError, each field
    named as the file names it (holiday_country -> holidays.country)."""
    if hasattr(error, "error_dict"):
        found = []
        for name, errors in error.error_dict.items():
            messages = [m for e in errors for m in e.messages]
            # An entry of a list field, named by its index: "[1]: ..." (Job.clean).
            found += [f"{field_path(where, name)}{m}" for m in messages if m.startswith("[")]
            rest = [m for m in messages if not m.startswith("[")]
            if rest:
                found.append(f"{field_path(where, name)}: {' '.join(rest)}")
        return found
    return [f"{where}: {' '.join(error.messages)}"]


def field_path(where: str, model_field: str | None) -> str:
    if model_field == "__all__":
        return where
    return f"{where}.{YAML_PATHS.get(model_field, model_field)}"


def project_name(where: str, value: Any) -> str:
    """A project's name as an item or the document names it: a slug."""
    if not isinstance(value, str) or not value:
        raise ApplyError(f"{where}: expected a project's name")
    try:
        validate_slug(value)
    except ValidationError:
        raise ApplyError(
            f"{where}: {quoted(value)} is not a name: letters, digits, - and _"
        ) from None
    if len(value) > 100:
        raise ApplyError(f"{where}: at most 100 characters")
    return value


def item_problem(where: str, item: Any, allowed: set[str]) -> str | None:
    """What is wrong with the shape of one item (a mapping of `allowed`
    fields with a name), or None."""
    if not isinstance(item, dict):
        return f"{where}: expected a mapping"
    unknown = set(item) - allowed
    if unknown:
        return f"{where}: unknown field(s): {', '.join(sorted(unknown))}"
    name = item.get("name")
    if not isinstance(name, str) or not name:
        return f"{where}.name: required"
    # Before any lookup by name: PostgreSQL refuses NUL even in a query.
    problems = text_problems(item)
    if problems:
        path, problem = problems[0]
        return f"{where}.{path}: {problem}"
    return None


def relative_errors(errors: list[str]) -> list[str]:
    """Errors of one item checked at where="" (a single job or calendar, as
    the API takes them): ".schedule: ..." -> "schedule: ...", ": ..." -> "..."."""
    return [e.removeprefix(".").removeprefix(": ") for e in errors]


def item_errors(error: ValidationError | ApplyError) -> list[str]:
    """The errors of one item checked at where="", named by field."""
    if isinstance(error, ValidationError):
        return relative_errors(describe_errors("", error))
    return relative_errors(error.errors)
