"""Reading secrets into a claimed run's environment (docs/design.md §11).

Only the job's own `env` is resolved: a manual trigger's overrides are sent
as given, so a key that may only trigger a job cannot read a secret by
naming it in an override. Each secret read is counted per project
(`croniq_secret_reads_total`).
"""

import collections
import dataclasses
from collections.abc import Mapping, Sequence

from django.db.models import Q

import audit
from vault import crypto, references
from vault.models import Secret

READS = "croniq_secret_reads_total"
# Values shorter than this are not masked in output (docs/design.md §11): a
# three-letter value would blank out ordinary words.
SHORTEST_REDACTED = 4


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A job's env with its references replaced, and the values the agent
    masks in the run's output."""

    env: dict[str, str]
    redact: list[str]


class Unresolved(Exception):
    """A reference that cannot be read now: the secret was deleted after the
    job was saved, or no configured key decrypts it."""


def resolve_many(
    envs: Sequence[tuple[str, Mapping[str, str]]], *, count: bool = True
) -> list[Resolved | Unresolved]:
    """For each (project, env): the Resolved env, or the Unresolved saying
    which secret could not be read. One query for all of them. `count`:
    the reads are a claim's, counted in croniq_secret_reads_total."""
    wanted = collections.defaultdict(set)
    for project, env in envs:
        for value in env.values():
            wanted[project].update(references.names_in(value))
    if not wanted:
        return [Resolved(dict(env), []) for _, env in envs]
    matches = Q()
    for project, names in wanted.items():
        matches |= Q(project=project, name__in=sorted(names))
    stored = {
        (project, name): ciphertext
        for project, name, ciphertext in Secret.objects.filter(matches).values_list(
            "project", "name", "ciphertext"
        )
    }
    values: dict[tuple[str, str], str | None] = {}
    for key, ciphertext in stored.items():
        try:
            values[key] = crypto.decrypt(ciphertext)
        except crypto.InvalidToken:
            values[key] = None
    results: list[Resolved | Unresolved] = []
    reads: collections.Counter[str] = collections.Counter()
    for project, env in envs:
        result = resolved(project, env, values)
        if isinstance(result, Resolved):
            reads[project] += sum(len(references.names_in(v)) for v in env.values())
        results.append(result)
    for project, read in sorted(reads.items()):
        if count and read:
            audit.increment(READS, read, project=project)
    return results


def resolved(
    project: str, env: Mapping[str, str], values: Mapping[tuple[str, str], str | None]
) -> Resolved | Unresolved:
    mine: dict[str, str] = {}
    for variable, value in env.items():
        for name in references.names_in(value):
            if (project, name) not in values:
                return Unresolved(f'env.{variable}: secret "{name}" does not exist')
            read = values[(project, name)]
            if read is None:
                return Unresolved(
                    f'env.{variable}: secret "{name}" cannot be decrypted with the '
                    "configured CRONIQ_SECRETS_KEYS"
                )
            mine[name] = read
    if not mine:
        return Resolved(dict(env), [])
    expanded = {variable: references.substitute(value, mine) for variable, value in env.items()}
    redact = sorted(
        {v for v in mine.values() if len(v) >= SHORTEST_REDACTED}, key=len, reverse=True
    )
    return Resolved(expanded, redact)
