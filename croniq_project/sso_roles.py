"""What an identity provider's roles claim grants in Croniq (docs/design.md §11).

A value `croniq:<project>:<role>` grants that role (viewer, operator,
editor, admin) in that project, and `croniq:admin` makes a superuser. A
role in a project that does not exist, or an unknown role, grants nothing
and is logged: the provider's groups can run ahead of Croniq's projects.

At each single sign-on login the user's roles from single sign-on become
exactly what the claim grants (`apply`): a role taken away at the provider
is taken away here at the next login. A role an admin gave the user by
hand (in the project's page) is the admin's, and single sign-on leaves it
alone; in that project the claim's role is not written (and is logged).
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from projects import roles, scoping
from projects.models import Project, Role

logger = logging.getLogger(__name__)

PREFIX = "croniq:"
SUPERUSER = "croniq:admin"


@dataclass(frozen=True)
class Grant:
    """What a claim grants: {project: role} (the highest where several
    name one project), superuser or not, and the `croniq:` values that
    granted nothing (an unknown project or role)."""

    roles: tuple[tuple[str, str], ...]
    superuser: bool
    ignored: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        """Whether the claim grants any role: a user without one is refused."""
        return self.superuser or bool(self.roles)


def values(claim: Any) -> list[str]:
    """The claim's values: a list of strings, or one string (some providers
    send a single group as a string). Anything else is no value."""
    if isinstance(claim, str):
        return [claim]
    if isinstance(claim, list | tuple):
        return [value for value in claim if isinstance(value, str)]
    return []


def grant(claim: Any, projects: Iterable[str]) -> Grant:
    """The Grant of a roles claim's value (None when the claim is absent),
    where `projects` exist.

    Keycloak's group mapper sends full group paths (`/croniq:default:viewer`):
    the leading slash is dropped. Values not starting with `croniq:` are
    someone else's groups and are skipped silently."""
    known = set(projects)
    held: dict[str, list[str]] = {}
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
        if project in known and role in roles.ORDER:
            held.setdefault(project, []).append(role)
        else:
            ignored.append(value)
    granted = {project: roles.highest(names) for project, names in held.items()}
    return Grant(
        tuple(sorted((p, r) for p, r in granted.items() if r is not None)),
        superuser,
        tuple(ignored),
    )


def log_ignored(username: str, ignored: Iterable[str]) -> None:
    for value in ignored:
        logger.warning(
            "single sign-on: %s's role %r grants nothing: no such project, or a role other than %s",
            username,
            value,
            ", ".join(roles.ORDER),
        )


def apply(user: Any, granted: Grant) -> bool:
    """Set `user`'s roles from single sign-on to exactly the granted ones,
    is_superuser to `croniq:admin`, and is_staff to whether any role is
    granted. Only for a user who signs in through single sign-on: a local
    superuser is never demoted by this. Returns whether anything changed."""
    wanted = dict(granted.roles)
    mine = {r.project.name: r for r in Role.objects.filter(user=user).select_related("project")}
    changed = False
    for project, role in mine.items():
        if role.from_sso and wanted.get(project) != role.role:
            role.delete()
            changed = True
    projects = {p.name: p for p in Project.objects.filter(name__in=list(wanted))}
    for project, role_name in wanted.items():
        held = mine.get(project)
        if held is not None and not held.from_sso:
            logger.warning(
                "single sign-on: %s holds %s in %s from an admin: the claim's %s is not written",
                user.get_username(),
                held.role,
                project,
                role_name,
            )
            continue
        if held is not None and held.role == role_name:
            continue
        if project not in projects:  # `default` on a database emptied by hand
            projects[project] = Project.objects.get_or_create(name=project)[0]
        Role.objects.create(project=projects[project], user=user, role=role_name, from_sso=True)
        changed = True
    flags = {"is_superuser": granted.superuser, "is_staff": granted.any}
    if any(getattr(user, name) != value for name, value in flags.items()):
        for name, value in flags.items():
            setattr(user, name, value)
        user.save(update_fields=list(flags))
        changed = True
    if changed:
        scoping.forget(user)
    return changed
