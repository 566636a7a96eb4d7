"""Secret references of notification channels (docs/design.md §9).

A channel names its secrets and never holds them: `${ENV_NAME}` reads the
environment, `file:/absolute/path` reads a file (a Docker or Kubernetes
secret), stripped, and `${secret:NAME}` reads the secrets store (vault,
docs/design.md §11). They are resolved at delivery time only, so the database,
the apply file and the audit trail carry the reference, never the value.

Whoever writes a channel chooses where it sends what it reads, so a
reference reaches only what was put there for channels: environment
variables named `CRONIQ_SECRET_*` (never `SECRET_KEY` or `DATABASE_URL`),
and files under CRONIQ_SECRETS_DIR (default /run/secrets; never /proc). The
same check runs when a channel is saved and when it delivers, so a channel
stored before these limits existed sends nothing it may no longer read.
"""

import os
import re
from pathlib import Path

from django.conf import settings

from vault import references as store_references
from vault import resolution as store_resolution
from vault.models import DEFAULT_PROJECT

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
FILE_PREFIX = "file:"
ENV_PREFIX = "CRONIQ_SECRET_"
# Kernel file systems: never a secret, however the secrets directory is set.
NEVER_READ = ("/proc", "/sys", "/dev")
NOT_A_REFERENCE = (
    "not a secret reference: write ${secret:NAME} (the secrets store), "
    "${CRONIQ_SECRET_NAME} or file:/run/secrets/name, never the secret itself"
)


def is_reference(text: str) -> bool:
    """Whether `text` is one whole reference: `${NAME}` or `file:...`.

    A relative `file:` path counts, so that resolving it says what is wrong.
    """
    if not isinstance(text, str):
        return False
    return (
        bool(ENV_REFERENCE.fullmatch(text))
        or bool(store_references.REFERENCE.fullmatch(text))
        or text.startswith(FILE_PREFIX)
    )


def validate_reference(text: str) -> None:
    """Raise ValueError unless `text` is a reference that resolves now."""
    resolve(text)


def resolve(text: str) -> str:
    """The secret `text` refers to; ValueError says why it cannot be read."""
    if not is_reference(text):
        raise ValueError(NOT_A_REFERENCE)
    match = ENV_REFERENCE.fullmatch(text)
    if match:
        return _from_environment(match.group(1))
    stored = store_references.REFERENCE.fullmatch(text)
    if stored:
        return _from_store(stored.group(1))
    return _from_file(text.removeprefix(FILE_PREFIX))


def expand(text: str) -> str:
    """`text` with every `${NAME}` inside it replaced by its value.

    For URLs and header values that hold a secret among other text
    ("Bearer ${CRONIQ_SECRET_TOKEN}"). A whole `file:/path` is read too: a
    Slack webhook URL is itself a secret.
    """
    if text.startswith(FILE_PREFIX):
        return _from_file(text.removeprefix(FILE_PREFIX))
    text = store_references.REFERENCE.sub(lambda match: _from_store(match.group(1)), text)
    return ENV_REFERENCE.sub(lambda match: _from_environment(match.group(1)), text)


def names_in(text: str) -> list[str]:
    """The environment variables `text` refers to, in order."""
    return ENV_REFERENCE.findall(text)


def store_names_in(text: str) -> list[str]:
    """The secrets of the store `text` refers to (`${secret:NAME}`), in order."""
    return store_references.names_in(text)


def forbidden(text: str) -> str | None:
    """Why `text` (a URL, header value or secret) refers to something a
    channel may not read, or None: the limits alone, whether or not the
    variable is set or the file exists here (the notifier's process may
    differ)."""
    if text.startswith(FILE_PREFIX):
        try:
            _allowed_path(text.removeprefix(FILE_PREFIX))
        except ValueError as error:
            return str(error)
        return None
    for name in names_in(text):
        if not name.startswith(ENV_PREFIX):
            return _not_a_secret_variable(name)
    return None


def _from_store(name: str) -> str:
    """A secret of the store. Channels are in the default project until
    projects come (docs/design.md §11)."""
    if not store_references.NAME.fullmatch(name):
        raise ValueError(f"${{secret:{name}}}: not a secret name")
    reference = {"value": f"${{secret:{name}}}"}
    [found] = store_resolution.resolve_many([(DEFAULT_PROJECT, reference)], count=False)
    if isinstance(found, store_resolution.Unresolved):
        raise ValueError(str(found).removeprefix("env.value: "))
    return found.env["value"]


def _from_environment(name):
    if not name.startswith(ENV_PREFIX):
        raise ValueError(_not_a_secret_variable(name))
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"${{{name}}} is not set in the environment")
    if not value.strip():
        raise ValueError(f"${{{name}}} is set but empty")
    return value


def _not_a_secret_variable(name) -> str:
    suggested = ENV_PREFIX + name.upper().removeprefix("CRONIQ_")
    return (
        f"${{{name}}}: a channel reads only environment variables named {ENV_PREFIX}*, "
        f"e.g. ${{{suggested}}} (or a file under {secrets_dir()})"
    )


def secrets_dir() -> str:
    """CRONIQ_SECRETS_DIR as written (what messages name)."""
    return settings.CRONIQ_SECRETS_DIR


def _allowed_path(path):
    """The real path of `path` (symlinks and `..` resolved); ValueError
    unless it lies inside the secrets directory and outside /proc."""
    if not Path(path).is_absolute():
        raise ValueError(f"file:{path}: the path must be absolute (file:{secrets_dir()}/name)")
    root = os.path.realpath(secrets_dir())
    real = os.path.realpath(path)
    inside = real != root and os.path.commonpath([real, root]) == root
    never = any(real == top or real.startswith(top + "/") for top in NEVER_READ)
    if not inside or never:
        raise ValueError(
            f"file:{path}: a channel reads only files under {secrets_dir()} "
            "(CRONIQ_SECRETS_DIR), symlinks resolved"
        )
    return real


def _from_file(path):
    real = _allowed_path(path)
    try:
        # The checked path, opened without following a link swapped in for
        # its last part since the check.
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
        with open(descriptor, encoding="utf-8") as file:
            value = file.read().strip()
    except OSError as error:
        raise ValueError(f"file:{path}: cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ValueError(f"file:{path}: not UTF-8 text") from None
    if not value:
        raise ValueError(f"file:{path} is empty")
    return value
