"""Who may do which operator action.

The admin actions, the dashboard's buttons and anything built on them later
ask here, so an action is allowed or refused the same way everywhere. It sits
in core, below every app: every app may call it, and it names the apps'
permissions only as strings.

Superusers hold every permission; other staff hold what their groups grant
(see the "Croniq viewers / operators / admins" groups), and what their role
grants in the project of the row acted on (projects.backends answers
`user.has_perm(permission, row)`): a caller acting on a row passes it.
"""

from typing import Any

from django.core.exceptions import PermissionDenied

# action -> the permission it needs ("app_label.codename"). Resuming needs
# the permission that pausing (draining) needs: one switch, two directions.
ACTIONS = {
    "job.run": "scheduler.run_job",
    "job.pause": "scheduler.pause_job",
    "job.resume": "scheduler.pause_job",
    "execution.cancel": "scheduler.cancel_execution",
    "execution.retry": "scheduler.retry_execution",
    "deadletter.replay": "scheduler.replay_deadletter",
    "deadletter.discard": "scheduler.discard_deadletter",
    "runner.drain": "runners.drain_runner",
    "runner.resume": "runners.drain_runner",
    "runner.forget": "runners.forget_runner",
    "token.revoke": "runners.revoke_runnertoken",
    "apikey.revoke": "control.revoke_apikey",
}


def allows(user: Any, action: str, target: Any = None) -> bool:
    """Whether `user` may do `action` (a key of ACTIONS); with `target`,
    whether to that object: the permission held for every object (the
    groups'), or held for this one by the role in its project. Without a
    target it means globally, for every object (runners, which no project
    holds, are asked so)."""
    permission = ACTIONS[action]
    if user.has_perm(permission):
        return True
    return target is not None and user.has_perm(permission, target)


def require(user: Any, action: str, target: Any = None) -> None:
    """Raise PermissionDenied (a 403) unless `user` may do `action` (to `target`)."""
    if not allows(user, action, target):
        raise PermissionDenied(f"{action} needs the permission {ACTIONS[action]}")
