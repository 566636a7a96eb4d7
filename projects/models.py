"""Projects (teams) and the roles people hold in them (docs/design.md §11).

Every job, calendar, concurrency group, check, channel, rule, secret and
API key names its project by slug (`project`, a column of its own row, so
the loop's hot queries join nothing). The slug is checked against this
table where rows are written (apply, the API, the admin): `projects.names`.

A role is given to one user or one Django group, per project. Today's
global groups (viewers, operators, admins) hold model permissions, which
answer for every project: a role adds to them, never takes away.
"""

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from projects import roles

DEFAULT = "default"


class Project(models.Model):
    name = models.SlugField(max_length=100, unique=True)
    description = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class RoleQuerySet(models.QuerySet["Role"]):
    def of(self, user: object) -> "RoleQuerySet":
        """The roles `user` holds, given to it or to one of its groups."""
        if not getattr(user, "is_authenticated", False) or not getattr(user, "pk", None):
            return self.none()
        return self.filter(Q(user=user) | Q(group__user=user))


class Role(models.Model):
    """`role` in `project`, held by `user` or by every member of `group`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="roles")
    role = models.CharField(max_length=10, choices=[(r, r) for r in roles.ORDER])
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE
    )
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE)
    # Single sign-on writes the roles its claim grants (croniq_project.sso_roles)
    # and re-reads them at each login: only those rows, never one an admin gave.
    from_sso = models.BooleanField(default=False, editable=False)

    objects = RoleQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True)
                | Q(user__isnull=True, group__isnull=False),
                name="role_user_or_group",
            ),
            models.UniqueConstraint(fields=["project", "user"], name="role_project_user"),
            models.UniqueConstraint(fields=["project", "group"], name="role_project_group"),
        ]
        ordering = ["project__name", "role"]

    def __str__(self) -> str:
        holder = self.user if self.user_id else f"group {self.group}"
        return f"{holder}: {self.role} of {self.project}"

    def clean(self) -> None:
        if (self.user_id is None) == (self.group_id is None):
            raise ValidationError("Give the role to a user or to a group, not both.")
