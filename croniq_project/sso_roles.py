"""What an identity provider's roles claim grants in Croniq (docs/design.md §11).

A value `croniq:<project>:<role>` grants that role in that project, and
`croniq:admin` makes a superuser. Projects do not exist yet: every object
is in project `default`, and a role is one of the global groups the
dashboard's migrations made. PROJECT_ROLES is the one place a Project model
replaces; a role in another project is ignored (and logged) until then.

At each single sign-on login the user's Croniq groups become exactly what
the claim grants (`apply`): a role taken away at the provider is taken away
here at the next login.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Group

logger = logging.getLogger(__name__)

PREFIX = "croniq:"
SUPERUSER = "croniq:admin"
DEFAULT_PROJECT = "default"

VIEWERS = "Croniq viewers"
OPERATORS = "Croniq operators"
ADMINS = "Croniq admins"
# The groups single sign-on manages: a user's other groups are left alone.
CRONIQ_GROUPS = (VIEWERS, OPERATORS, ADMINS)

# (project, role) -> the group granting it. There is no editors' group yet:
# the Croniq admins edit jobs and calendars but also hold API keys and the
# secrets store, which an editor must not. So an editor gets the operators'
# group (less than asked, never more) until roles are per project.
PROJECT_ROLES = {
    (DEFAULT_PROJECT, "viewer"): VIEWERS,
    (DEFAULT_PROJECT, "operator"): OPERATORS,
    (DEFAULT_PROJECT, "editor"): OPERATORS,
    (DEFAULT_PROJECT, "admin"): ADMINS,
}


@dataclass(frozen=True)
class Grant:
    """What a claim grants: Croniq groups, superuser or not, and the
    `croniq:` values that granted nothing (another project, an unknown role)."""

    groups: frozenset[str]
    superuser: bool
    ignored: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        """Whether the claim grants any role: a user without one is refused."""
        return self.superuser or bool(self.groups)


def values(claim: Any) -> list[str]:
    """The claim's values: a list of strings, or one string (some providers
    send a single group as a string). Anything else is no value."""
    if isinstance(claim, str):
        return [claim]
    if isinstance(claim, list | tuple):
        return [value for value in claim if isinstance(value, str)]
    return []


def grant(claim: Any) -> Grant:
    """The Grant of a roles claim's value (None when the claim is absent).

    Keycloak's group mapper sends full group paths (`/croniq:default:viewer`):
    the leading slash is dropped. Values not starting with `croniq:` are
    someone else's groups and are skipped silently."""
    groups: set[str] = set()
    superuser = False
    ignored: list[str] = []
    for raw in values(claim):
        value = raw.strip().lstrip("/")
        if not value.startswith(PREFIX):
            continue
        if value == SUPERUSER:
            superuser = True
            continue
        project, _, role = value[len(PREFIX) :].partition(":")
        group = PROJECT_ROLES.get((project, role))
        if group is None:
            ignored.append(value)
        else:
            groups.add(group)
    return Grant(frozenset(groups), superuser, tuple(ignored))


def log_ignored(username: str, ignored: Iterable[str]) -> None:
    for value in ignored:
        logger.warning(
            "single sign-on: %s's role %r grants nothing: Croniq has only the project %r "
            "and the roles %s",
            username,
            value,
            DEFAULT_PROJECT,
            ", ".join(sorted({role for _, role in PROJECT_ROLES})),
        )


def apply(user: Any, granted: Grant) -> bool:
    """Set `user`'s Croniq groups to exactly the granted ones, is_superuser to
    `croniq:admin`, and is_staff to whether any role is granted. Only for a
    user who signs in through single sign-on: a local superuser is never
    demoted by this. Returns whether anything changed."""
    held = set(user.groups.filter(name__in=CRONIQ_GROUPS).values_list("name", flat=True))
    missing = granted.groups - set(
        Group.objects.filter(name__in=granted.groups).values_list("name", flat=True)
    )
    for name in sorted(missing):
        logger.error("single sign-on: the group %r no longer exists: nothing granted", name)
    changed = False
    if to_remove := held - granted.groups:
        user.groups.remove(*Group.objects.filter(name__in=to_remove))
        changed = True
    if to_add := granted.groups - held - missing:
        user.groups.add(*Group.objects.filter(name__in=to_add))
        changed = True
    flags = {"is_superuser": granted.superuser, "is_staff": granted.any}
    if any(getattr(user, name) != value for name, value in flags.items()):
        for name, value in flags.items():
            setattr(user, name, value)
        user.save(update_fields=list(flags))
        changed = True
    return changed
