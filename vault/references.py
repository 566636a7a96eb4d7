"""`${secret:NAME}` in a job's environment and in an http job's request
(docs/design.md §11, §15).

A job stores the reference, never the value: the admin, the dashboard, the
API, the audit trail, apply's plan and notifications all read the job's row
and show the reference. The value is read only into the assignment handed to
the runner that claimed a run (vault.resolution).
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any

from vault.models import NAME_PATTERN

REFERENCE = re.compile(r"\$\{secret:([^}]*)\}")
NAME = re.compile(NAME_PATTERN)


def names_in(text: str) -> list[str]:
    """The secret names `text` refers to, in order, malformed ones included."""
    return REFERENCE.findall(text)


def request_texts(http: Mapping[str, Any] | None) -> dict[str, str]:
    """The texts of an http job's request (docs/design.md §15) where
    references may stand, by their path in `http`: `url`, `body`,
    `headers.NAME`; {} for none."""
    if not isinstance(http, Mapping):
        return {}
    texts = {key: http[key] for key in ("url", "body") if isinstance(http.get(key), str)}
    headers = http.get("headers")
    if isinstance(headers, Mapping):
        texts.update(
            (f"headers.{name}", value) for name, value in headers.items() if isinstance(value, str)
        )
    return texts


def has_reference(env: Mapping[str, str] | None) -> bool:
    if not env:
        return False
    return any("${secret:" in value for value in env.values())


def problems(env: Mapping[str, str], known: Iterable[str]) -> list[tuple[str, str]]:
    """[(env name, why)] for each reference of `env` that is malformed or
    names no secret in `known` (the names of the job's project)."""
    known = set(known)
    found = []
    for variable, value in env.items():
        for name in names_in(value):
            if not NAME.fullmatch(name):
                found.append((variable, f"{'${secret:' + name + '}'!r} is not a secret name"))
            elif name not in known:
                found.append((variable, f'unknown secret "{name}"'))
    return found


def substitute(text: str, values: Mapping[str, str]) -> str:
    """`text` with each reference replaced by its value from `values` (which
    holds every name `text` refers to)."""
    return REFERENCE.sub(lambda match: values[match.group(1)], text)
