"""The admin of the rows a project holds, answered by the user's role in
each row's project (docs/design.md §11).

`ProjectScoped`, a ModelAdmin mixin for jobs, runs, dead letters,
concurrency groups, calendars, checks, channels, rules, secrets and API
keys: the list shows the rows of the projects where the user may view
them; a row is viewed, changed, deleted or acted on (run, pause, replay,
revoke, ...) when the user's role in its project allows it (a 403
otherwise, nothing changed); the form's `project` offers only the
projects where the user may put the row, and refuses any other one posted.
Superusers and the global groups' model permissions answer for every
project, as everywhere.

What is global (runners, runner tokens, maintenance) keeps Django's
model permissions: no role reaches it.
"""

from typing import Any

from django import forms
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest

from core import permissions
from projects import names, scoping

# What an API key bound to no project is called where one picks its project.
EVERY_PROJECT = ("", "— every project (a global key)")


class ProjectField(forms.ChoiceField):
    """The project a row goes in, among those the user's role allows; one
    left out of the post (a script written before projects) is `fallback`:
    the row's own on a change, `default` (or the user's first) on an add."""

    def __init__(self, choices: list[tuple[str, str]], fallback: str, **kwargs: Any) -> None:
        super().__init__(
            choices=choices,
            required=False,
            initial=fallback,
            error_messages={
                "invalid_choice": "“%(value)s” is not a project where you may put it: "
                "pick one of those offered."
            },
            **kwargs,
        )
        self.fallback = fallback

    def clean(self, value: Any) -> str:
        # Left out (None), not posted empty: "" may be a choice of its own.
        return super().clean(self.fallback if value is None else value)

    def validate(self, value: Any) -> None:
        # Also when empty: "" is an API key's "every project", a choice of its own.
        if not self.valid_value(value):
            raise forms.ValidationError(
                self.error_messages["invalid_choice"],
                code="invalid_choice",
                params={"value": value},
            )


class ProjectScoped:
    """A ModelAdmin mixin: the model's rows, by the user's role in each
    row's project. `project_field` is the lookup of a row's project slug
    (`job__project` for runs)."""

    project_field = "project"

    def holder(self, obj: Any) -> Any:
        """The row whose project answers for `obj` (itself; a ping's check)."""
        return obj

    # -- what the user may do --------------------------------------------

    def permission(self, verb: str) -> str:
        opts = self.opts
        return f"{opts.app_label}.{verb}_{opts.model_name}"

    def may(self, request: HttpRequest, verb: str, obj: Any = None) -> bool:
        """Whether the user may `verb` `obj`; without one, in some project."""
        held = self.holder(obj) if obj is not None else None
        return scoping.may(request.user, self.permission(verb), held)

    def changes_all_it_sees(self, request: HttpRequest) -> bool:
        """Whether the user may change every row it may see: a list that
        masks what only an editor may read (a channel's URL) shows it then."""
        user, change, view = request.user, self.permission("change"), self.permission("view")
        if scoping.everywhere(user, change):
            return True
        return not scoping.everywhere(user, view) and (
            scoping.projects_where(user, view) <= scoping.projects_where(user, change)
        )

    def may_act(self, request: HttpRequest, action: str, obj: Any = None) -> bool:
        """The core.permissions `action` on `obj`; without one, in some
        project (what offers the action at all)."""
        if obj is None:
            return scoping.may(request.user, permissions.ACTIONS[action])
        return permissions.allows(request.user, action, obj)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.may(request, "view") or self.may(request, "change")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, "view", obj) or self.may(request, "change", obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.may(request, "add")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, "change", obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, "delete", obj)

    # -- which rows --------------------------------------------------------

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        rows = super().get_queryset(request)
        return scoping.visible(request.user, self.permission("view"), rows, self.project_field)

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        """A row of a project the user may not see is found all the same,
        so that its pages answer 403 (Django asks has_view_permission with
        it) rather than sending to the index as for a row that is gone."""
        found = super().get_object(request, object_id, from_field)
        if found is not None:
            return found
        field = self.opts.pk if from_field is None else self.opts.get_field(from_field)
        try:
            return self.model._default_manager.get(**{field.name: field.to_python(object_id)})
        except (self.model.DoesNotExist, ValueError, forms.ValidationError):
            return None

    def related_to_project(self) -> list[str]:
        """What to read along with a row to know its project."""
        path = self.project_field.split("__")[:-1]
        return ["__".join(path)] if path else []

    def get_field_queryset(self, db: Any, db_field: models.Field, request: HttpRequest) -> Any:
        """A relation's choices (a job's calendar, a rule's channels) are
        the rows of the projects where the user may see them."""
        chosen = super().get_field_queryset(db, db_field, request)
        related = db_field.related_model
        if related not in names.held_models():
            return chosen
        if chosen is None:
            chosen = related._default_manager.using(db).all()
        opts = related._meta
        return scoping.visible(request.user, f"{opts.app_label}.view_{opts.model_name}", chosen)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        """What goes with a row and names no project of its own (a job's
        runs and their logs, a calendar's periods) is part of it: deleting
        the row needs the permission on it alone, by the role in its project."""
        deleted, count, needed, protected = super().get_deleted_objects(objs, request)
        held = {str(model._meta.verbose_name) for model in names.held_models()}
        return deleted, count, {name for name in needed if str(name) in held}, protected

    # -- actions -------------------------------------------------------------

    def response_action(
        self, request: HttpRequest, queryset: models.QuerySet, **kwargs: Any
    ) -> Any:
        # Django 6.1 passes where the action was chosen (`action_location`).
        self.refuse_rows_out_of_reach(request, queryset)
        return super().response_action(request, queryset, **kwargs)

    def refuse_rows_out_of_reach(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        """403 before an action touches anything when one row it was asked
        for (ticked, of any project, or all the list holds) is one the
        user's role does not allow it on."""
        action = self.get_actions(request).get(chosen_action(request))
        if action is None:
            return  # Django answers "No action selected"
        # Django 6.1 gives an Action, 5.2 a (func, name, description) tuple.
        func, verb = (action.func, action.name) if hasattr(action, "func") else action[:2]
        needed = getattr(func, "allowed_permissions", ())
        if selects_across(request):
            rows = queryset
        else:
            ticked = request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)
            rows = self.model._default_manager.filter(pk__in=ticked)
        if related := self.related_to_project():
            rows = rows.select_related(*related)  # none: it would follow every foreign key
        for row in rows:
            for name in needed:
                if not getattr(self, f"has_{name}_permission")(request, row):
                    raise PermissionDenied(f"you may not {verb} {row}")

    # -- the project field ------------------------------------------------

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> list[Any]:
        """Every form shows the row's project, after its name."""
        fieldsets = super().get_fieldsets(request, obj)
        shown = [field for _, options in fieldsets for field in options["fields"]]
        if "project" in shown or "name" not in shown:
            return fieldsets
        placed = []
        for title, options in fieldsets:
            fields = list(options["fields"])
            if "name" in fields:
                fields.insert(fields.index("name") + 1, "project")
            placed.append((title, {**options, "fields": fields}))
        return placed

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        if "project" in form.base_fields:
            field = self.opts.get_field("project")
            choices = self.project_choices(request, "add" if obj is None else "change")
            fallback = obj.project if obj is not None else default_of(choices, field.default)
            form.base_fields["project"] = ProjectField(
                choices, fallback, label="project", help_text=field.help_text
            )
        return form

    def project_choices(self, request: HttpRequest, verb: str) -> list[tuple[str, str]]:
        """The projects where the user may `verb` (add, change) a row."""
        permission = self.permission(verb)
        if scoping.everywhere(request.user, permission):
            allowed = names.known()
            blank = [EVERY_PROJECT] if self.opts.get_field("project").blank else []
        else:
            allowed = scoping.projects_where(request.user, permission) & names.known()
            blank = []
        return blank + [(name, name) for name in sorted(allowed)]


def chosen_action(request: HttpRequest) -> str:
    """The action a changelist's POST names (its two action bars: `index`)."""
    try:
        return request.POST.getlist("action")[int(request.POST.get("index", 0))]
    except (IndexError, ValueError):
        return ""


def selects_across(request: HttpRequest) -> bool:
    """Whether the POST asks for every row of the list, as Django's action
    form reads its `select_across` (a BooleanField)."""
    value = request.POST.get("select_across", "")
    return bool(value) and value.lower() not in ("false", "0")


def default_of(choices: list[tuple[str, str]], default: str) -> str:
    """An added row's project: the model's default when it is among
    `choices`, else the first of them."""
    values = [value for value, _ in choices]
    if default in values or not values:
        return default
    return values[0]
