"""The four roles of a project and what each may do (docs/design.md §11).

Pure data: each role holds the permissions of the one before it and more.
The permissions are Django's own (`app_label.codename`), so one check,
`user.has_perm(permission, row)`, answers for the admin, the dashboard and
the API alike (projects.backends answers it per project).
"""

VIEWER, OPERATOR, EDITOR, ADMIN = "viewer", "operator", "editor", "admin"
ORDER = (VIEWER, OPERATOR, EDITOR, ADMIN)

# The rows a project holds, by app: what its roles' permissions are about.
EDITED: dict[str, tuple[str, ...]] = {
    "scheduler": ("job", "concurrencygroup"),
    "calendars": ("calendar",),
    "checks": ("check",),
    "notifications": ("channel", "rule"),
}
SEEN: dict[str, tuple[str, ...]] = {
    **EDITED,
    "scheduler": (*EDITED["scheduler"], "execution", "deadletter"),
    # A check's pings are seen with it (checks.admin answers by the check's project).
    "checks": (*EDITED["checks"], "ping"),
}
# A project admin's own rows: its secrets, its API keys and its members.
HELD: dict[str, tuple[str, ...]] = {
    "vault": ("secret",),
    "control": ("apikey",),
    "projects": ("role",),
}


def _model_permissions(models: dict[str, tuple[str, ...]], verbs: tuple[str, ...]) -> set[str]:
    return {
        f"{app}.{verb}_{model}"
        for app, names in models.items()
        for model in names
        for verb in verbs
    }


VIEWING = _model_permissions(SEEN, ("view",))
OPERATING = {
    "scheduler.run_job",
    "scheduler.pause_job",
    "scheduler.cancel_execution",
    "scheduler.retry_execution",
    "scheduler.replay_deadletter",
    "scheduler.discard_deadletter",
}
EDITING = _model_permissions(EDITED, ("add", "change", "delete"))
ADMINISTERING = _model_permissions(HELD, ("view", "add", "change", "delete")) | {
    "control.revoke_apikey"
}

# What every role holds without a row, in every project: the runners are
# shared by all projects, and a run waiting for one is explained by them.
SHARED = frozenset({"runners.view_runner"})

PERMISSIONS: dict[str, frozenset[str]] = {
    VIEWER: frozenset(VIEWING),
    OPERATOR: frozenset(VIEWING | OPERATING),
    EDITOR: frozenset(VIEWING | OPERATING | EDITING),
    ADMIN: frozenset(VIEWING | OPERATING | EDITING | ADMINISTERING),
}


def highest(held: list[str]) -> str | None:
    """The highest of the roles `held` (a user's own and its groups'), if any."""
    ranked = [ORDER.index(role) for role in held if role in ORDER]
    return ORDER[max(ranked)] if ranked else None


def grants(role: str | None, permission: str) -> bool:
    return role is not None and permission in PERMISSIONS[role]


def least_role_for(permission: str) -> str | None:
    """The lowest role that holds `permission`; None when no role does (a
    global permission: runners, runner tokens, maintenance)."""
    for role in ORDER:
        if permission in PERMISSIONS[role]:
            return role
    return None
