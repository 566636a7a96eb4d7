"""Field snapshots and diffs for audited admin changes.

A diff is `{"field": [old, new]}` with JSON-safe values (foreign keys as
their primary key). Secrets never enter a snapshot, so they never reach the
audit trail: fields named like secrets are left out, and in a job's `env` the
values of variables named like secrets (`*_TOKEN`, `*_PASSWORD`, `*_SECRET`,
`*_KEY`) are shown as `********`, unless the value is a `${secret:NAME}`
reference to the secrets store; so are those of a container job's env, and
the headers of an http job's request named like secrets (`Authorization`,
`Cookie`, `X-Api-Key`, `*-Token`). The stored row keeps the real values.
"""

import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

from vault import references

SECRET_MARKERS = ("secret", "password")
SECRET_ENV_WORDS = ("TOKEN", "PASSWORD", "SECRET", "KEY")
ENV_FIELDS = {"env"}
# An http job's request (docs/design.md §15), whose headers may carry credentials.
REQUEST_FIELDS = {"http"}
# A container job's `container` (docs/design.md §15), whose env may carry credentials.
CONTAINER_FIELDS = {"container"}
# Headers that carry credentials whatever their value looks like.
SECRET_HEADERS = ("authorization", "proxy-authorization", "cookie")
MASK = "********"
# An HTTP authorization scheme: Bearer, Basic, Token, AWS4-HMAC-SHA256.
AUTH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9-]{0,39}")


def is_secret(field_name: str) -> bool:
    name = field_name.lower()
    return any(marker in name for marker in SECRET_MARKERS)


def is_secret_env(variable: str) -> bool:
    """`API_TOKEN`, `DB_PASSWORD`, `aws_secret_access_key`, `SECRET`..."""
    name = variable.upper()
    return any(name == word or name.endswith("_" + word) for word in SECRET_ENV_WORDS)


def masked_env(env: Any) -> Any:
    """A job's environment as it may be shown: secret-looking values masked."""
    if not isinstance(env, dict):
        return env
    return {
        name: MASK if is_secret_env(name) and not is_store_reference(value) else value
        for name, value in env.items()
    }


def masked_container(spec: Any) -> Any:
    """A container job's `container` as it may be shown: its env's
    secret-looking values masked, as a job's env's are."""
    if not isinstance(spec, dict) or not isinstance(spec.get("env"), dict):
        return spec
    return {**spec, "env": masked_env(spec["env"])}


def is_secret_header(name: str) -> bool:
    """`Authorization`, `Cookie`, `X-Api-Key`, `X-Auth-Token`, `Client-Secret`..."""
    return name.lower() in SECRET_HEADERS or is_secret_env(name.replace("-", "_"))


def masked_http(request: Any) -> Any:
    """An http job's request as it may be shown: the values of headers named
    like secrets masked, unless they are a `${secret:NAME}` reference
    (`is_header_reference`)."""
    if not isinstance(request, dict) or not isinstance(request.get("headers"), dict):
        return request
    headers = {
        name: MASK if is_secret_header(name) and not is_header_reference(value) else value
        for name, value in request["headers"].items()
    }
    return {**request, "headers": headers}


def is_header_reference(value: Any) -> bool:
    """Whether a header's value is a `${secret:NAME}` reference to the store,
    whole or after an authorization scheme (`Bearer ${secret:api-token}`):
    nothing of it is secret."""
    if not isinstance(value, str):
        return False
    scheme, _, rest = value.rpartition(" ")
    return is_store_reference(rest) and (not scheme or AUTH_SCHEME.fullmatch(scheme) is not None)


def is_store_reference(value: Any) -> bool:
    """Whether an env value is one whole `${secret:NAME}` reference to the
    secrets store (vault.references): the reference is no secret, and the
    pages and the API show it so an operator sees where the value comes from."""
    return isinstance(value, str) and references.REFERENCE.fullmatch(value) is not None


def masked_diff(changes: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """A diff ({"field": [old, new]}) whose environment fields (a container's
    too) and request headers are masked."""
    return {name: masked_sides(name, sides) for name, sides in changes.items()}


def masked_sides(name: str, sides: list[Any]) -> list[Any]:
    if name in ENV_FIELDS:
        return [masked_env(side) for side in sides]
    if name in REQUEST_FIELDS:
        return [masked_http(side) for side in sides]
    if name in CONTAINER_FIELDS:
        return [masked_container(side) for side in sides]
    return sides


def audited_fields(
    model: type[models.Model], exclude: Collection[str] = ()
) -> Iterator[models.Field]:
    """Concrete fields worth recording: no primary key, no auto timestamps, no secrets."""
    for field in model._meta.concrete_fields:
        if field.primary_key or field.name in exclude or is_secret(field.name):
            continue
        if isinstance(field, models.DateField) and (field.auto_now or field.auto_now_add):
            continue
        yield field


def json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def snapshot(obj: models.Model, exclude: Collection[str] = ()) -> dict[str, Any]:
    """{field name: JSON-safe value} of an instance's audited fields."""
    return {
        field.name: json_safe(field.value_from_object(obj))
        for field in audited_fields(type(obj), exclude)
    }


def diff(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[Any]]:
    """{"field": [old, new]} for every field whose value differs, secrets masked.

    `old` or `new` may be empty (a creation or a deletion): missing values
    are None. A change of a secret value still shows as a change of `env`.
    """
    names = list(new) + [name for name in old if name not in new]
    return masked_diff(
        {name: [old.get(name), new.get(name)] for name in names if old.get(name) != new.get(name)}
    )
