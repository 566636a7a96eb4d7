"""What an API key may do (docs/design.md §8): each call needs one scope, and
`admin` holds them all."""

from collections.abc import Collection, Iterable

JOBS_READ = "jobs:read"
JOBS_WRITE = "jobs:write"
JOBS_TRIGGER = "jobs:trigger"
EXECUTIONS_READ = "executions:read"
EXECUTIONS_WRITE = "executions:write"
CALENDARS_READ = "calendars:read"
CALENDARS_WRITE = "calendars:write"
RUNNERS_READ = "runners:read"
RUNNERS_WRITE = "runners:write"
DEAD_LETTERS_READ = "dead-letters:read"
DEAD_LETTERS_WRITE = "dead-letters:write"
AUDIT_READ = "audit:read"
# Channels and rules: a channel sends what it reads to the URL it names.
NOTIFICATIONS_WRITE = "notifications:write"
# Check-ins (docs/design.md §12): reading one shows its ping URL, the secret.
CHECKS_READ = "checks:read"
CHECKS_WRITE = "checks:write"
# The secrets store (docs/design.md §11): set, list and delete; no scope reads a value.
SECRETS_WRITE = "secrets:write"
ADMIN = "admin"

ALL = (
    JOBS_READ,
    JOBS_WRITE,
    JOBS_TRIGGER,
    EXECUTIONS_READ,
    EXECUTIONS_WRITE,
    CALENDARS_READ,
    CALENDARS_WRITE,
    RUNNERS_READ,
    RUNNERS_WRITE,
    DEAD_LETTERS_READ,
    DEAD_LETTERS_WRITE,
    AUDIT_READ,
    NOTIFICATIONS_WRITE,
    CHECKS_READ,
    CHECKS_WRITE,
    SECRETS_WRITE,
    ADMIN,
)


def parse(value: str | Iterable[str]) -> list[str]:
    """Scopes from a list or a space- or comma-separated string, sorted and
    without repeats; ValueError naming the first unknown one."""
    words = value.replace(",", " ").split() if isinstance(value, str) else list(value)
    for word in words:
        if word not in ALL:
            raise ValueError(f"unknown scope {word!r} (known: {', '.join(ALL)})")
    if not words:
        raise ValueError("at least one scope")
    return sorted(set(words))


def covers(granted: Collection[str], needed: str) -> bool:
    """Whether a key holding `granted` may make a call that needs `needed`."""
    return ADMIN in granted or needed in granted


def within(requested: Collection[str], granted: Collection[str]) -> bool:
    """Whether every scope of `requested` is covered by `granted`: a key
    never mints a broader one."""
    if ADMIN in requested:
        return ADMIN in granted
    return all(covers(granted, scope) for scope in requested)
