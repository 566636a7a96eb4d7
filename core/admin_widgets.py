"""Form fields and widgets the admin's forms share, for values stored as
JSON but typed by people: a list of names (tags, or ticked checkboxes), a
mapping of names to values (rows of two inputs), a text with suggestions.

Each works without JavaScript; `croniq/admin_widgets.js` only turns the tag
text into removable tags and adds and removes rows. The fields parse; the
rules stay with the caller's `check` (the apply file's checks), so the
admin and `manage.py apply` refuse the same things with the same words.
"""

import json
from collections.abc import Iterable
from itertools import zip_longest
from typing import Any

from django import forms

MEDIA = forms.Media(js=["croniq/admin_widgets.js"], css={"all": ["croniq/admin_widgets.css"]})


def names_in(value: Any) -> list[Any]:
    """The names in what a form posts: a text ("linux, gpu"), several
    values (ticked checkboxes), or a JSON list ('["mon", "tue"]', as the
    admin's JSON inputs took them and scripts may still post). Items of a
    JSON list stay as they are, so a check can refuse a number or ""."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [
            name for item in value for name in (names_in(item) if isinstance(item, str) else [item])
        ]
    text = str(value).strip()
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deeply
            parsed = None
        if isinstance(parsed, list):
            return parsed
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def mapping_in(value: Any) -> Any:
    """The {name: value} in what a form posts: rows of (name, value), a
    text of NAME=value lines, or a JSON object ('{"A": "1"}'). A JSON value
    that is not an object is returned as it is, for a check to refuse."""
    if value is None or isinstance(value, dict):
        return dict(value or {})
    if isinstance(value, (list, tuple)):
        return mapping_of_rows(value)
    text = str(value).strip()
    if text.startswith(("{", "[")):
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested too deeply
            pass
    return mapping_of_lines(text)


def mapping_of_rows(rows: Iterable[tuple[str, str]]) -> dict[str, str]:
    mapping = {}
    for number, (name, value) in enumerate(rows, start=1):
        name = name.strip()
        if not name and not value:
            continue  # the blank row a form always offers
        if not name:
            raise forms.ValidationError(f"row {number}: a value needs a name")
        if name in mapping:
            raise forms.ValidationError(f"{name} is set twice")
        mapping[name] = value
    return mapping


def mapping_of_lines(text: str) -> dict[str, str]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, equals, value = line.partition("=")
        if not equals or not name.strip():
            raise forms.ValidationError(f"line {number}: write NAME=value")
        rows.append((name, value))
    return mapping_of_rows(rows)


class CheckedField(forms.Field):
    """A field whose parsed value goes through `check(value)`, which returns
    the value to store or raises ValidationError."""

    def __init__(self, *, check=None, **kwargs):
        self.check = check
        super().__init__(**kwargs)

    def clean(self, value: Any) -> Any:
        value = super().clean(value)
        return self.check(value) if self.check else value

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != self.to_python(initial)
        except forms.ValidationError:
            return True


class TagsInput(forms.TextInput):
    """A text of names separated by commas; the script shows them as tags."""

    def __init__(self, attrs=None):
        super().__init__({"class": "vTextField", "data-tags": "", **(attrs or {})})

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, (list, tuple)):
            return ", ".join(str(name) for name in value)
        return super().format_value(value)

    @property
    def media(self) -> forms.Media:
        return MEDIA


class NamesField(CheckedField):
    """A list of names, typed as tags or ticked as checkboxes."""

    widget = TagsInput

    def to_python(self, value: Any) -> list[Any]:
        return names_in(value)

    def prepare_value(self, value: Any) -> list[Any]:
        return names_in(value)


class Checkboxes(forms.CheckboxSelectMultiple):
    """Checkboxes on one line ("inline-choices") or in columns ("columns-choices")."""

    def __init__(self, layout, choices=()):
        super().__init__(attrs={"class": layout}, choices=choices)

    @property
    def media(self) -> forms.Media:
        return MEDIA


class DependentCheckboxes(Checkboxes):
    """Checkboxes of which only those another field's value allows are
    offered (the holiday categories of the chosen country).

    `allowed` maps each value of the other field (`depends_on`, a field
    name) to the names it allows; `offered` is what the server renders
    shown, the rest `hidden`, a ticked one always shown so a stored choice
    the other field no longer allows is seen (and refused by the form's
    check). The script shows and hides them as the other field is typed in.
    """

    template_name = "croniq/widgets/dependent_checkboxes.html"

    def __init__(self, layout: str, depends_on: str, empty: str):
        super().__init__(layout)
        self.depends_on = depends_on
        self.empty = empty
        self.allowed: dict[str, list[str]] = {}
        self.offered: set[str] = set()

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        widget = context["widget"]
        # The other field's id, as Django builds ids: "id_" + the prefixed name.
        widget["depends_on_id"] = widget["attrs"].get("id", "").removesuffix(name) + self.depends_on
        widget["allowed"] = json.dumps(self.allowed, sort_keys=True)
        widget["empty"] = self.empty
        options = [option for _group, group, _index in widget["optgroups"] for option in group]
        for option in options:
            option["offered"] = option["value"] in self.offered or option["selected"]
        widget["any_offered"] = any(option["offered"] for option in options)
        return context


class KeyValueRows(forms.Widget):
    """One row of name and value inputs per entry, and a blank row to add
    one; the script adds and removes rows. The rows post as `<name>__name`
    and `<name>__value`, in order; a single `<name>` (NAME=value lines or a
    JSON object, as scripts may post) is read instead when present."""

    template_name = "croniq/widgets/key_value_rows.html"

    def format_value(self, value: Any) -> list[tuple[str, str]]:
        rows = [(str(k), "" if v is None else str(v)) for k, v in value or []]
        return [*rows, ("", "")]

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        if name in data:
            return data[name]
        names, values = values_of(data, f"{name}__name"), values_of(data, f"{name}__value")
        if not names and not values:
            return None
        return list(zip_longest(names, values, fillvalue=""))

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return name not in data and f"{name}__name" not in data

    def id_for_label(self, id_: str | None) -> str | None:
        return f"{id_}__name_0" if id_ else id_

    @property
    def media(self) -> forms.Media:
        return MEDIA


def values_of(data: Any, key: str) -> list[Any]:
    if hasattr(data, "getlist"):
        return data.getlist(key)
    value = data.get(key, [])
    return list(value) if isinstance(value, (list, tuple)) else [value]


class MappingField(CheckedField):
    """A mapping of names to values, edited as rows."""

    widget = KeyValueRows

    def to_python(self, value: Any) -> Any:
        return mapping_in(value)

    def prepare_value(self, value: Any) -> Any:
        """(name, value) rows for the widget, also from input that does not parse."""
        if isinstance(value, (list, tuple)):
            return value
        try:
            mapping = mapping_in(value)
        except forms.ValidationError:
            return [line.partition("=")[::2] for line in str(value).splitlines() if line.strip()]
        return list(mapping.items()) if isinstance(mapping, dict) else [(str(mapping), "")]


class SuggestionsInput(forms.TextInput):
    """A text input offering `options()` as the browser's searchable list
    (a <datalist>): any text may be typed, the form's check decides."""

    template_name = "croniq/widgets/suggestions.html"

    def __init__(self, options, attrs=None):
        self.options = options
        super().__init__({"class": "vTextField", "autocomplete": "off", **(attrs or {})})

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        widget = context["widget"]
        widget["datalist_id"] = f"{widget['attrs'].get('id') or name}_options"
        widget["attrs"]["list"] = widget["datalist_id"]
        widget["options"] = self.options()
        return context
