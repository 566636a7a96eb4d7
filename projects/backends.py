"""The authentication backend that answers per-project roles.

`user.has_perm(permission, row)` asks every backend: Django's ModelBackend
answers the global permissions (superusers, the global groups) and only
without a row; this one answers with a row: yes when the permission is
held globally (it holds for every row), else by the role `user` holds in
the row's project. Without a row it answers no, a role never granting a
permission on every project, but for what every project shares
(`roles.SHARED`: reading the runners), which any role holds.
"""

from typing import Any

from django.contrib.auth.backends import BaseBackend

from projects import roles, scoping


class ProjectRoleBackend(BaseBackend):
    def authenticate(self, request: Any, **credentials: Any) -> None:
        return None  # it signs nobody in: it only answers permissions

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if not getattr(user_obj, "is_active", False):
            return False
        if obj is None:
            return perm in roles.SHARED and bool(scoping.roles_of(user_obj))
        if user_obj.has_perm(perm):  # global: ModelBackend, without the row
            return True
        return roles.grants(scoping.role_in(user_obj, scoping.project_of(obj)), perm)

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        """The admin's index lists an app to who holds a permission in it:
        the apps of what every project shares, to any role holder."""
        return any(
            permission.startswith(f"{app_label}.") and self.has_perm(user_obj, permission)
            for permission in roles.SHARED
        )
