"""Crontabs to an apply document (docs/design.md §13).

One parser for both ends: `croniq-admin import_crontab` (the server) and
`croniq-runner discover` (a machine with only the runner installed) call
`import_crontabs` and print its document with `to_yaml`, so the same crontab
gives byte-identical documents wherever it is read. It lives in the runner
package because that package installs without Django and PyYAML; the
server depends on the runner package, never the other way round.

What it reads is cron's format as crontab(5) of Vixie cron and cronie
describes it: `NAME=value` lines (cron's quoting: one pair of matching
quotes around the value is removed, nothing is expanded), job lines of five
fields or an `@macro` then the command (a system crontab has the user
before it), `%` in the command (the first unescaped one starts the
command's standard input, later ones are newlines in it, `\\%` is a plain
`%`). Every line that is not blank or a comment gets a report entry: what it
became, or why it was skipped. Standard library only.

With `checks=True` the same lines become a `checks:` section instead, one
check per line with a schedule, named as the line's job would be: a team
watches its cron lines first and moves them to jobs later. The check's token
is a credential and never goes into a document; `wrap_crontab` rewrites the
crontab itself around the tokens the server holds (`croniq-admin
import_crontab --checks --wrap`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Cron's macros, as cron spells them (lowercase: cron compares them exactly).
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
REBOOT = "@reboot"
MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (name, lowest, highest, names of the values from the lowest on)
FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, MONTH_NAMES),
    ("day-of-week", 0, 7, DAY_NAMES),
)
# Settings cron itself reads: they steer scheduling and mail, and cron's
# job does not need them (TZ stays: the command reads it too).
CRON_SETTINGS = frozenset(
    {"MAILTO", "MAILFROM", "CRON_TZ", "CONTENT_TYPE", "CONTENT_TRANSFER_ENCODING"}
)
# A user name in a system crontab, as the job's run_as takes it.
USER_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]{0,31}")
# cronie's load_env: a name (quoted, or up to `=` or a blank), `=`, the value.
ENV_RE = re.compile(r"""[ \t]*(?:"([^"]*)"|'([^']*)'|([^ \t="']+))[ \t]*=(.*)""", re.DOTALL)
BLANKS = " \t"
BLANKS_RE = re.compile(r"[ \t]+")
NUMBER_RE = re.compile(r"[0-9]+")  # ASCII digits: cron reads no others
NAME_LIMIT = 100  # a job's, channel's and rule's name (SlugField max_length)
OWNER_LIMIT = 100  # Job.owner's max_length
SLUG_LIMIT = 60  # the command's part of a job name
HOST_LIMIT = 30  # the host's part
# Words a segment of a shell command starts with that say little about what
# the job does: `cd /srv/app && ./backup` is named after ./backup.
PREAMBLE_WORDS = frozenset({"cd", "test", "[", "[[", "sleep", "true", ":", "umask", "export"})
WRAPPER_WORDS = frozenset(
    {
        "exec",
        "nohup",
        "time",
        "nice",
        "ionice",
        "chronic",
        "command",
        "if",
        "then",
        "else",
        "do",
        "!",
    }
)
ASSIGNMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
SEGMENT_SPLIT_RE = re.compile(r"&&|\|\||[;|(){}]")
REDIRECT_RE = re.compile(r"(?:^\d+|&)?[<>]")
# A check's grace as apply reads it: docs/design.md §12's default, written
# out so the operator sees what to lengthen for a job that runs long.
CHECK_GRACE = "1m"
CRON_SHELL = "/bin/sh"  # the shell cron runs a line with when no SHELL= says otherwise
WRAPPER = ("croniq-runner", "wrap")


@dataclass(frozen=True)
class Entry:
    """What one line of a crontab became, for the report."""

    source: str
    number: int
    outcome: str
    job: str | None = None  # the job's (or check's) name, for a line that became one
    skipped: bool = False

    def __str__(self) -> str:
        where = f"{self.source}:{self.number}" if self.number else self.source
        return f"{where}: {'skipped: ' if self.skipped else ''}{self.outcome}"


@dataclass(frozen=True)
class Watched:
    """A line that became a check: what `wrap_crontab` needs to rewrite it."""

    source: str
    number: int
    check: str
    command_at: int  # where the command (and its `%` input) starts in the line
    shell: str  # what cron runs the command with: the SHELL= above it, else /bin/sh


@dataclass
class Imported:
    """An apply document (plain data) and its report, one entry per line;
    with checks, the lines that became one."""

    document: dict[str, Any]
    report: list[Entry]
    watched: list[Watched] = field(default_factory=list)

    @property
    def skipped(self) -> list[Entry]:
        return [entry for entry in self.report if entry.skipped]

    def report_text(self) -> str:
        return "".join(f"{entry}\n" for entry in self.report)


@dataclass(frozen=True)
class Crontab:
    """One crontab to import: its text and the name the report gives it."""

    source: str
    text: str


class LineError(ValueError):
    """A line that cannot be mapped; its message is the report's reason."""


@dataclass
class _Mail:
    """The MAILTO in force: the job owner it becomes, or none (mail off)."""

    owner: str
    addresses: tuple[str, ...]


@dataclass
class _State:
    """What the lines read so far set for the lines below them (per file)."""

    env: dict[str, str] = field(default_factory=dict)
    timezone: str | None = None
    timezone_problem: str | None = None  # a CRON_TZ/TZ line named no known zone
    mail: _Mail | None = None


@dataclass(frozen=True)
class _Line:
    """A job line taken apart; `raw` is the command as written, `%` input
    included (a suffix of the line)."""

    schedule: str
    user: str | None
    command: str
    stdin: str | None
    raw: str


@dataclass
class _Builder:
    host: str | None
    system: bool
    timezone: str
    checks: bool = False
    jobs: list[dict[str, Any]] = field(default_factory=list)
    watches: list[dict[str, Any]] = field(default_factory=list)
    watched: list[Watched] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    report: list[Entry] = field(default_factory=list)


def import_crontabs(
    crontabs: Iterable[Crontab],
    *,
    timezone: str,
    system: bool = False,
    host: str | None = None,
    checks: bool = False,
) -> Imported:
    """The apply document and report for `crontabs`, read in order.

    `timezone` is the zone of jobs no `CRON_TZ=`/`TZ=` line covers (the
    caller's --timezone, else `machine_timezone()`); `system`: the files
    have the user field (/etc/crontab, /etc/cron.d); `host`: the jobs get
    the label `host:HOST` and their names start with it, so the crontabs of
    several machines go into one Croniq without their jobs' names meeting.
    Each file starts with cron's defaults (no env, no MAILTO). `checks`: a
    `checks:` section instead of jobs (docs/design.md §13). ValueError
    for a `timezone` or `host` that cannot be used.
    """
    if not known_timezone(timezone):
        raise ValueError(f"timezone: {timezone!r} is not an IANA timezone (e.g. Europe/Berlin)")
    if host is not None and not slug(host):
        raise ValueError(f"host: {host!r} has no letters or digits to name jobs after")
    if host is not None and (host != host.strip() or "," in host or any(c.isspace() for c in host)):
        # A runner reads --labels as a comma-separated list: it could never carry it.
        raise ValueError(f"host: {host!r}: a label holds no commas or blanks")
    builder = _Builder(host=host, system=system, timezone=timezone, checks=checks)
    for crontab in crontabs:
        _read(builder, crontab)
    if checks:
        return Imported({"checks": builder.watches}, builder.report, builder.watched)
    document: dict[str, Any] = {"jobs": builder.jobs}
    if builder.channels:
        document["channels"] = [builder.channels[name] for name in sorted(builder.channels)]
        document["notify"] = [builder.rules[name] for name in sorted(builder.rules)]
    return Imported(document=document, report=builder.report)


def _read(builder: _Builder, crontab: Crontab) -> None:
    state = _State()
    for number, raw in enumerate(crontab.text.split("\n"), start=1):
        line = raw.removesuffix("\r")
        if not line.strip(BLANKS) or line.lstrip(BLANKS).startswith("#"):
            continue
        try:
            outcome, job = _line(builder, state, crontab.source, number, line)
        except LineError as error:
            builder.report.append(Entry(crontab.source, number, str(error), skipped=True))
        else:
            builder.report.append(Entry(crontab.source, number, outcome, job=job))


def _line(
    builder: _Builder, state: _State, source: str, number: int, line: str
) -> tuple[str, str | None]:
    """(what the line became, the job's name if it became one); LineError."""
    assignment = parse_assignment(line)
    if assignment is not None:
        if builder.checks:
            return _check_setting(state, number, *assignment), None
        return _setting(builder, state, number, *assignment), None
    if builder.checks:
        return _watch(builder, state, source, number, line)
    if line.lstrip(BLANKS).startswith("-"):
        raise LineError(
            "a '-' before the schedule (cron's 'do not log this job') has no Croniq "
            "counterpart: remove the '-' to import the job"
        )
    job = _job(builder, state, source, number, line)
    builder.jobs.append(job)
    builder.names.add(job["name"])
    return f"job {job['name']}", job["name"]


def _watch(
    builder: _Builder, state: _State, source: str, number: int, line: str
) -> tuple[str, str]:
    """A job line as a check; LineError for one that cannot be watched."""
    stripped = line.lstrip(BLANKS)
    # cron's '-' only keeps the line out of syslog: a check watches it as any
    # other (and the wrapped line keeps the '-').
    parsed = _parse(builder, state, stripped[1:] if stripped.startswith("-") else line)
    # Named as the line's job would be (@reboot lines too), so a check and
    # the job that later replaces it have one name.
    name = _unique_name(builder, parsed.schedule, parsed.command)
    builder.names.add(name)
    if parsed.schedule == REBOOT:
        raise LineError(
            "@reboot has no schedule to watch: no check (import it as a job, which "
            "runs when its runner starts)"
        )
    check: dict[str, Any] = {
        "name": name,
        "description": f"{source} line {number}: {line.strip()}",
        "schedule": parsed.schedule,
        "timezone": state.timezone or builder.timezone,
        "grace": CHECK_GRACE,
    }
    if builder.host is not None:
        check["labels"] = [f"host:{builder.host}"]
    builder.watches.append(check)
    shell = state.env.get("SHELL") or CRON_SHELL
    builder.watched.append(Watched(source, number, name, len(line) - len(parsed.raw), shell))
    return f"check {name}", name


def _is_wrapped(command: str) -> bool:
    """Whether the command already runs under `croniq-runner wrap`."""
    for segment in SEGMENT_SPLIT_RE.split(command):
        words = _essential(segment.split())
        if [os.path.basename(word) for word in words[:1]] + words[1:2] == list(WRAPPER):
            return True
    return False


def parse_assignment(line: str) -> tuple[str, str] | None:
    """(name, value) of a `NAME=value` line as cron reads it; None for a
    line that is not one (a job); LineError for one written wrong."""
    match = ENV_RE.fullmatch(line)
    if match is None:
        return None
    name = next(group for group in match.groups()[:3] if group is not None)
    value = match[4].strip(BLANKS)
    if value[:1] in ("'", '"'):
        closing = value.find(value[0], 1)
        if closing < 0:
            raise LineError(f"{name}: the value's opening {value[0]} is never closed")
        if value[closing + 1 :].strip(BLANKS):
            raise LineError(f"{name}: text after the value's closing {value[0]}")
        value = value[1:closing]
    if not name:
        raise LineError("an empty variable name before '='")
    return name, value


def _zone(state: _State, number: int, name: str, value: str) -> tuple[str, bool]:
    """Read a CRON_TZ= or TZ= line into `state`: (its zone, whether known)."""
    zone = value.removeprefix(":")  # TZ=:Europe/Berlin is the same zone
    if known_timezone(zone):
        state.timezone, state.timezone_problem = zone, None
        return zone, True
    state.timezone = None
    state.timezone_problem = f"{name}={value} (line {number}) is not an IANA timezone"
    return zone, False


def _check_setting(state: _State, number: int, name: str, value: str) -> str:
    if name in ("CRON_TZ", "TZ"):
        zone, known = _zone(state, number, name, value)
        if known:
            return f"{name}={value}: the checks below expect their pings in {zone}"
        return f"{name}={value}: the checks below are skipped: unknown timezone {zone}"
    if name != "MAILTO":
        state.env[name] = value  # SHELL: what a wrapped line runs its command with
    # cron keeps reading it: the wrapped crontab keeps the line as it is.
    return f"{name}={value}: cron's, not a check's (the crontab keeps it)"


def _setting(builder: _Builder, state: _State, number: int, name: str, value: str) -> str:
    if name == "MAILTO":
        return _mailto(builder, state, value)
    if name in ("CRON_TZ", "TZ"):
        zone, known = _zone(state, number, name, value)
        where = "the jobs below run in" if known else "the jobs below are skipped: unknown timezone"
        if name == "CRON_TZ":
            return f"{name}={value}: {where} {zone}"
        state.env[name] = value
        return f"{name}={value}: env of the jobs below; {where} {zone}"
    if name in CRON_SETTINGS:
        return f"{name}={value}: a setting of cron's mail, not needed in Croniq (not in env)"
    state.env[name] = value
    if name == "SHELL" and value not in ("/bin/sh", "sh"):
        return (
            f"SHELL={value}: env of the jobs below; Croniq runs commands with sh -c, "
            f"not {value}: check commands that need {os.path.basename(value)}"
        )
    return f"{name}={value}: env of the jobs below"


def _mailto(builder: _Builder, state: _State, value: str) -> str:
    addresses = tuple(a.strip() for a in value.split(",") if a.strip())
    if not addresses:
        state.mail = None
        return "MAILTO is empty: the jobs below send no mail"
    local = [a for a in addresses if not looks_like_email(a)]
    if local:
        state.mail = None
        return (
            f"MAILTO={value}: {', '.join(local)} is a local mailbox, not an email "
            "address: no channel, the jobs below send no mail"
        )
    owner = bounded(", ".join(addresses), OWNER_LIMIT)
    state.mail = _Mail(owner=owner, addresses=addresses)
    name = bounded("mailto-" + slug(" ".join(addresses)), NAME_LIMIT)
    if name in builder.channels and builder.channels[name]["to"] != list(addresses):
        # Other addresses with the same slug (a.b@x and a-b@x): a name of their own.
        digest = hashlib.sha256(owner.encode()).hexdigest()[:8]
        name = f"{bounded(name, NAME_LIMIT - 9)}-{digest}"
    builder.channels[name] = {"name": name, "kind": "email", "to": list(addresses)}
    builder.rules[name] = {
        "name": name,
        "events": ["job.failing"],
        "channels": [name],
        "owner": owner,
    }
    return (
        f"MAILTO={value}: channel {name} and a job.failing rule {name} for the jobs "
        f"below (their owner: {owner})"
    )


def _job(builder: _Builder, state: _State, source: str, number: int, line: str) -> dict[str, Any]:
    parsed = _parse(builder, state, line)
    return _job_item(
        builder,
        state,
        source,
        number,
        line,
        parsed.schedule,
        parsed.command,
        parsed.stdin,
        parsed.user,
    )


def _parse(builder: _Builder, state: _State, line: str) -> _Line:
    """A job line's schedule, user, command and input, as cron reads them;
    LineError for what cron would refuse (or the zone above it is unknown)."""
    words = blank_split(line, 1)
    if words[0].startswith("@"):
        schedule, rest = words[0], words[1] if len(words) > 1 else ""
        if schedule != REBOOT and schedule not in MACROS:
            raise LineError(f"unknown macro {schedule!r} (cron's: {', '.join((REBOOT,) + MACROS)})")
    else:
        fields = blank_split(line, 5)
        if len(fields) < 6:
            raise LineError(
                f"{len(fields)} fields and no command: a job line has 5 schedule "
                "fields (minute hour day-of-month month day-of-week) and a command"
            )
        schedule, rest = " ".join(fields[:5]), fields[5]
        check_fields(fields[:5])
    user = None
    if builder.system:
        parts = blank_split(rest, 1)
        if len(parts) < 2:
            raise LineError("a system crontab's line needs a user and a command after the schedule")
        user, rest = parts
        if not USER_RE.fullmatch(user):
            raise LineError(f"{user!r} is not a user name")
    raw = rest.lstrip(BLANKS)
    command, stdin = split_percent(raw)
    if not command.strip():
        raise LineError("no command")
    if _is_wrapped(command):
        # Its check's token is in it: as a job's command, name or
        # description it would travel in the document.
        raise LineError(
            "already runs under croniq-runner wrap, with a check's token: import the line "
            "from before it was wrapped (a token stays out of documents)"
        )
    if state.timezone_problem:
        raise LineError(state.timezone_problem)
    return _Line(schedule=schedule, user=user, command=command, stdin=stdin, raw=raw)


def _job_item(
    builder: _Builder,
    state: _State,
    source: str,
    number: int,
    line: str,
    schedule: str,
    command: str,
    stdin: str | None,
    user: str | None,
) -> dict[str, Any]:
    name = _unique_name(builder, schedule, command)
    job: dict[str, Any] = {
        "name": name,
        "description": f"{source} line {number}: {line.strip()}",
    }
    if schedule == REBOOT:
        job["run_on_register"] = True  # and no schedule: it runs only when a runner starts
    else:
        job["schedule"] = schedule
    job["timezone"] = state.timezone or builder.timezone
    job["command"] = command
    if stdin:
        job["stdin"] = stdin
    if state.env:
        job["env"] = dict(sorted(state.env.items()))
    if builder.host is not None:
        job["labels"] = [f"host:{builder.host}"]
    if user is not None:
        job["run_as"] = user
    if state.mail is not None:
        job["owner"] = state.mail.owner
    return job


def _unique_name(builder: _Builder, schedule: str, command: str) -> str:
    """The command's slug (after the host's), unique in the document.

    A name already taken gets a short hash of the schedule and the command,
    which does not move when lines are added above it; only a line repeated
    word for word gets -2, -3 in the order of the file.
    """
    base = command_slug(command)
    if builder.host is not None:
        base = f"{bounded(slug(builder.host), HOST_LIMIT)}-{base}"
    if base not in builder.names:
        return base
    digest = hashlib.sha256(f"{schedule}\n{command}".encode()).hexdigest()[:8]
    hashed = f"{base}-{digest}"
    candidate, n = hashed, 1
    while candidate in builder.names:
        n += 1
        candidate = f"{hashed}-{n}"
    return candidate


def blank_split(text: str, most: int) -> list[str]:
    """`text` split at runs of spaces and tabs, as cron separates fields
    (str.split would split at any Unicode space too), at most `most` times."""
    # Only the start is stripped: the command keeps its trailing blanks, as in cron.
    return [part for part in BLANKS_RE.split(text.lstrip(BLANKS), maxsplit=most) if part != ""]


def check_fields(fields: Sequence[str]) -> None:
    """LineError naming the field when five cron fields are not cron's."""
    for text, (name, low, high, names) in zip(fields, FIELDS, strict=True):
        for item in text.split(","):
            _check_item(item, name, low, high, names)


def _check_item(item: str, name: str, low: int, high: int, names: tuple[str, ...]) -> None:
    if not item:
        raise LineError(f"{name} field: an empty item")
    base, slash, step = item.partition("/")
    if slash and (not NUMBER_RE.fullmatch(step) or int(step) == 0):
        raise LineError(f"{name} field: the step {step!r} is not a whole number of 1 or more")
    if base == "*":
        return
    first, dash, last = base.partition("-")
    start = _value(first, name, low, high, names, item)
    if dash:
        end = _value(last, name, low, high, names, item)
        if name == "day-of-week" and end == 0 and start > 0:
            end = 7  # cronie: a range may end on Sunday (mon-sun, 5-0)
        if end < start:
            raise LineError(f"{name} field: the range {base!r} runs backwards")


def _value(token: str, name: str, low: int, high: int, names: tuple[str, ...], item: str) -> int:
    if NUMBER_RE.fullmatch(token):
        value = int(token)
        if not low <= value <= high:
            raise LineError(f"{name} field: {value} is out of range {low}-{high}")
        return value
    if names and token.lower() in names:
        return names.index(token.lower()) + low
    hint = f" or a name ({'-'.join((names[0], names[-1]))})" if names else ""
    raise LineError(f"{name} field: {item!r} is not a number in {low}-{high}{hint}")


def split_percent(text: str) -> tuple[str, str | None]:
    """(command, standard input or None), as cron splits a command at `%`.

    Vixie cron's child_process: in the command, `\\%` is `%` (the backslash
    dropped) and other backslashes stay; the first unescaped `%` ends it.
    In the input after it, unescaped `%` are newlines and `\\%` is `%`.
    """
    command: list[str] = []
    escaped = False
    for i, char in enumerate(text):
        if escaped:
            if char == "%":
                command[-1] = "%"
            else:
                command.append(char)
            escaped = False
            continue
        if char == "%":
            return "".join(command), _stdin(text[i + 1 :])
        command.append(char)
        escaped = char == "\\"
    return "".join(command), None


def input_at(text: str) -> int:
    """Where cron's first unescaped `%` is in a command as written (where
    `split_percent` ends the command); len(text) when there is none."""
    escaped = False
    for i, char in enumerate(text):
        if char == "%" and not escaped:
            return i
        escaped = char == "\\" and not escaped
    return len(text)


def _stdin(text: str) -> str:
    out: list[str] = []
    escaped = False
    for char in text:
        if escaped:
            if char != "%":
                out.append("\\")
        elif char == "%":
            char = "\n"
        escaped = char == "\\"
        if not escaped:
            out.append(char)
    if escaped:
        out.append("\\")
    return "".join(out)


def command_slug(command: str) -> str:
    """A name for a job after what its command does.

    The first segment of the command (split at `&&`, `||`, `;`, `|` and
    brackets) that does more than prepare (`cd`, `test`, `sleep`, ...),
    without leading variable assignments and wrappers (`nice -n 19`,
    `exec`), its redirections left out, program paths cut to their last
    part: `cd /srv && /usr/local/bin/backup.sh --full >/dev/null` is
    `backup-sh-full`.
    """
    segments = [_essential(s.split()) for s in SEGMENT_SPLIT_RE.split(command)]
    words = next(
        (s for s in segments if s and s[0] not in PREAMBLE_WORDS),
        next((s for s in segments if s), []),
    )
    kept: list[str] = []
    for word in words:
        head, redirect = _before_redirect(word)
        if head:
            kept.append(os.path.basename(head.rstrip("/")) or head)
        if redirect:
            break
    return bounded(slug(" ".join(kept)), SLUG_LIMIT) or "job"


def _before_redirect(word: str) -> tuple[str, bool]:
    """(the part of a word before a redirection in it, whether it has one):
    `backup.sh>/dev/null` is `backup.sh`, `2>&1` nothing."""
    match = REDIRECT_RE.search(word)
    if match is None:
        return word, False
    return word[: match.start()], True


def _essential(words: list[str]) -> list[str]:
    """`words` without leading `NAME=value` words and wrappers (with their
    options: `nice -n 19`, `ionice -c3`)."""
    i = 0
    while i < len(words):
        if ASSIGNMENT_RE.match(words[i]):
            i += 1
        elif words[i] in WRAPPER_WORDS:
            i += 1
            while i < len(words) and (words[i].startswith("-") or words[i].isdigit()):
                i += 1
        else:
            break
    return words[i:]


def slug(text: str) -> str:
    """Lowercase letters, digits and single dashes."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at a dash when it can be."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return cut.rsplit("-", 1)[0] if "-" in cut[limit // 2 :] else cut


def looks_like_email(address: str) -> bool:
    """An address the email channel takes: local part, @, a domain with a
    dot (or localhost); `root` alone is a local mailbox."""
    local, at, domain = address.rpartition("@")
    if not at or not local or any(c.isspace() for c in address):
        return False
    return domain == "localhost" or ("." in domain and not domain.startswith("."))


def text_of(data: bytes) -> str:
    """A crontab's bytes as text. Bytes that are not UTF-8 cannot go into
    the document (nor the database): they become U+FFFD, and the report
    still names their line."""
    return data.decode("utf-8", "replace")


def known_timezone(name: str) -> bool:
    if not name or name != name.strip() or name.startswith("/") or ".." in name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return False  # OSError: a directory such as Europe
    return True


def machine_timezone(environ: dict[str, str] | None = None, root: str = "/") -> str:
    """This machine's IANA timezone, as cron reads it: TZ, /etc/timezone,
    the target of /etc/localtime; UTC when none names a known zone."""
    environ = dict(os.environ) if environ is None else environ
    candidates = [environ.get("TZ", "").removeprefix(":")]
    try:
        with open(os.path.join(root, "etc/timezone")) as handle:
            candidates.append(handle.read().strip())
    except OSError:
        pass
    try:
        target = os.readlink(os.path.join(root, "etc/localtime"))
        candidates.append(target.partition("zoneinfo/")[2])
    except OSError:
        pass
    return next((zone for zone in candidates if known_timezone(zone)), "UTC")


def header(imported: Imported) -> list[str]:
    """The comment lines above the document."""
    lines = [
        "Croniq apply document imported from crontab lines (docs/design.md §13).",
        "Review it, then: croniq-admin apply FILE (docs/migrating-from-crontab.md).",
    ]
    if "checks" in imported.document:
        lines = [
            "Croniq checks watching crontab lines (docs/design.md §13). Apply it, then",
            "install the crontab `croniq-admin import_crontab --checks --wrap` prints",
            "(docs/migrating-from-crontab.md).",
        ]
    if imported.skipped:
        lines.append(
            f"{len(imported.skipped)} line(s) skipped: the report on standard error says why."
        )
    return lines


def render(imported: Imported) -> str:
    """What `import_crontab` and `discover` print: the same bytes for the
    same input, whichever of them read it."""
    return to_yaml(imported.document, header(imported))


# ---------------------------------------------------------------------------
# YAML: a small emitter, so both ends print the same bytes without PyYAML.
# Every string is double-quoted with YAML's escapes: nothing a crontab holds
# (quotes, colons, `#`, `yes`, `null`, leading blanks, newlines) can change
# what the document means.

SECTION_ORDER = ("jobs", "channels", "notify")
PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Keys YAML 1.1 (PyYAML) reads as booleans or null when plain.
SPECIAL_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}


def to_yaml(document: dict[str, Any], header: Sequence[str] = ()) -> str:
    """`document` as block YAML: `header` lines as comments, then the
    mapping, keys in their order. Only dicts, lists, str, bool, int, None."""
    lines = [f"# {text}".rstrip() for text in header]
    _emit_mapping(document, 0, lines)
    return "\n".join(lines) + "\n"


def _emit_mapping(mapping: dict[str, Any], indent: int, lines: list[str], first: str = "") -> None:
    pad = " " * indent
    for i, (key, value) in enumerate(mapping.items()):
        lead = first if i == 0 and first else pad
        _emit_value(f"{lead}{_key(key)}:", value, indent, lines)


def _emit_value(prefix: str, value: Any, indent: int, lines: list[str]) -> None:
    if isinstance(value, dict) and value:
        lines.append(prefix)
        _emit_mapping(value, indent + 2, lines)
    elif isinstance(value, list) and value:
        lines.append(prefix)
        for item in value:
            dash = " " * (indent + 2) + "- "
            if isinstance(item, dict) and item:
                _emit_mapping(item, indent + 4, lines, first=dash)
            else:
                lines.append(dash + scalar(item))
    else:
        lines.append(f"{prefix} {scalar(value)}")


def _key(key: str) -> str:
    if PLAIN_KEY_RE.fullmatch(key) and key.lower() not in SPECIAL_WORDS:
        return key
    return quote(key)


def scalar(value: Any) -> str:
    """A flow scalar (or an empty collection) YAML reads back as `value`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return quote(value)
    if value == {}:
        return "{}"
    if value == []:
        return "[]"
    raise TypeError(f"to_yaml: {type(value).__name__} is not a string, number or bool")


def quote(text: str) -> str:
    """`text` as a YAML double-quoted scalar."""
    return '"' + "".join(_escape(char) for char in text) + '"'


def _escape(char: str) -> str:
    if char in ESCAPES:
        return ESCAPES[char]
    code = ord(char)
    if 0x20 <= code < 0x7F:
        return char
    # YAML's printable set, less the characters it folds as line breaks
    # (NEL, LS, PS) and the byte order mark: these are written as escapes.
    printable = (
        0xA0 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF
    ) and code not in (0x2028, 0x2029, 0xFEFF)
    if printable:
        return char
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"


def document_json(document: dict[str, Any]) -> str:
    """The document as JSON (apply reads JSON too), for scripts."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------
# The wrapped crontab (docs/design.md §13): each watched line runs its
# command under `croniq-runner wrap`, which pings the line's check.


def wrap_crontab(
    crontab: Crontab,
    imported: Imported,
    tokens: Mapping[str, str],
    server: str,
    program: str = WRAPPER[0],
) -> tuple[str, list[Entry]]:
    """`crontab`'s text with each line `imported` (with checks) watches
    rewritten to run under `croniq-runner wrap`, and a report entry for
    each line the import reported.

    `tokens`: the ping token of each check the server holds, by name. A line
    whose check is not there yet stays as it is (reported); every other
    line, blank lines and comments too, is kept byte for byte. `program`:
    croniq-runner as the machine's cron finds it (a name on the crontab's
    PATH, or a path).
    """
    lines = crontab.text.split("\n")
    watched = {w.number: w for w in imported.watched if w.source == crontab.source}
    report: list[Entry] = []
    for entry in imported.report:
        if entry.source != crontab.source:
            continue
        found = watched.get(entry.number)
        if found is None:
            report.append(entry)
            continue
        token = tokens.get(found.check)
        if token is None:
            reason = f"check {found.check} does not exist yet: apply the checks document first"
            report.append(
                Entry(entry.source, entry.number, f"{reason} (line left as it was)", skipped=True)
            )
            continue
        try:
            lines[found.number - 1] = _wrapped_line(
                lines[found.number - 1], found, wrap_command(token, server, found.shell, program)
            )
        except ValueError as error:
            report.append(Entry(entry.source, entry.number, f"not wrapped: {error}", skipped=True))
            continue
        report.append(Entry(entry.source, entry.number, f"wrapped: pings check {found.check}"))
    return "\n".join(lines), report


def _wrapped_line(raw: str, watched: Watched, head: str) -> str:
    """The line with `head` (`wrap_command`) before its command, in single
    quotes; what comes before the command (schedule, user) and its `%`
    input kept as written."""
    line = raw.removesuffix("\r")
    command = line[watched.command_at :]
    at = input_at(command)
    return (
        line[: watched.command_at]
        + head
        + shell_quote(command[:at])
        + command[at:]
        + raw[len(line) :]
    )


def wrap_command(token: str, server: str, shell: str, program: str = WRAPPER[0]) -> str:
    """The start of a crontab command that runs what follows it (a shell
    line in single quotes) with `shell -c` under `croniq-runner wrap`,
    pinging the check of `token` at `server`: each word quoted for the
    shell and its `%` escaped for cron. ValueError for a word with a
    backslash before a `%`, which cron cannot pass on."""
    # `--check=TOKEN`, one word: a token may start with "-" (token_urlsafe),
    # which `--check TOKEN` would hand argparse as an option, not its value.
    words = [program, WRAPPER[1], f"--check={token}", "--server", server, "--", shell, "-c"]
    if any("\\%" in word for word in words):
        raise ValueError("a backslash before a % cannot be written in a crontab line")
    return " ".join(shlex.quote(word) for word in words).replace("%", "\\%") + " "


def shell_quote(command: str) -> str:
    """`command` as written in a crontab (cron's `\\%` escapes in it, no
    `%` input), in single quotes, a `'` in it written `'\\''`. cron removes
    the backslash of each `\\%` before the shell reads the line, as it did
    for the line unwrapped, and the quotes add no backslash before a `%`:
    the shell gets the command text cron gave it before."""
    return "'" + command.replace("'", "'\\''") + "'"
