"""System check of stored jobs' `${secret:NAME}` references, in their env
and their http request (`migrate` and `manage.py check --database default`
run it).

Before the secrets store a job's `env` could hold `${secret:...}` as plain
text; now such a run fails at claim when the store lacks the secret. Rewriting
the value in a migration would guess at what the operator meant, so the
upgrade names the jobs to change, or the secrets to set, instead.
"""

from typing import Any

from django.core import checks
from django.db import DatabaseError, connections
from django.db.models import Q

from vault import references
from vault.models import Secret

UNKNOWN_SECRET = "croniq.W202"


@checks.register(checks.Tags.database)
def stored_job_references(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """A warning for each reference of a stored job, in its env or its http
    request, to a secret the store lacks."""
    found: list[checks.CheckMessage] = []
    for alias in databases or ():
        found += [
            checks.Warning(
                f"job {name!r}: {path}: {problem}",
                hint="Its runs fail at claim until the secret is set (croniq secrets set, "
                "the admin or POST /api/v1/secrets) or the job's env or http request is "
                "changed.",
                id=UNKNOWN_SECRET,
            )
            for name, path, problem in unresolvable(alias)
        ]
    return found


def unresolvable(alias: str) -> list[tuple[str, str, str]]:
    """(job, path, why) of the stored jobs on database `alias`: the path as
    apply names the field, `env.NAME`, `http.url`, `http.headers.NAME`,
    `http.body`."""
    from scheduler.models import Job

    connection = connections[alias]
    try:
        tables = connection.introspection.table_names()
        if Job._meta.db_table not in tables or Secret._meta.db_table not in tables:
            return []  # not migrated yet
        referring = Q(env__icontains="${secret:") | Q(http__icontains="${secret:")
        jobs = list(
            Job.objects.using(alias).filter(referring).values_list("name", "env", "http", "project")
        )
        if not jobs:
            return []
        # A job reads its own project's secrets alone (docs/design.md §11).
        known: dict[str, set[str]] = {}
        for project, secret in Secret.objects.using(alias).values_list("project", "name"):
            known.setdefault(project, set()).add(secret)
    except DatabaseError:
        return []  # no database to look at: nothing to warn about
    found = []
    for name, env, http, project in jobs:
        texts = {
            f"env.{variable}": value
            for variable, value in (env.items() if isinstance(env, dict) else ())
            if isinstance(value, str)
        }
        texts.update(
            (f"http.{path}", text) for path, text in references.request_texts(http).items()
        )
        found += [
            (name, path, problem)
            for path, problem in references.problems(texts, known.get(project, set()))
        ]
    return found
