"""Secret references of notification channels (DESIGN.md §9).

A channel names its secrets and never holds them: `${ENV_NAME}` reads the
environment, `file:/absolute/path` reads a file (a Docker or Kubernetes
secret), stripped. They are resolved at delivery time only, so the database,
the apply file and the audit trail carry the reference, never the value.
"""

import os
import re
from pathlib import Path

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
FILE_PREFIX = "file:"
NOT_A_REFERENCE = "not a secret reference: write ${ENV_NAME} or file:/path, never the secret itself"


def is_reference(text):
    """Whether `text` is one whole reference: `${NAME}` or `file:...`.

    A relative `file:` path counts, so that resolving it says what is wrong.
    """
    if not isinstance(text, str):
        return False
    return bool(ENV_REFERENCE.fullmatch(text)) or text.startswith(FILE_PREFIX)


def validate_reference(text):
    """Raise ValueError unless `text` is a reference that resolves now."""
    resolve(text)


def resolve(text):
    """The secret `text` refers to; ValueError says why it cannot be read."""
    if not is_reference(text):
        raise ValueError(NOT_A_REFERENCE)
    match = ENV_REFERENCE.fullmatch(text)
    if match:
        return _from_environment(match.group(1))
    return _from_file(text.removeprefix(FILE_PREFIX))


def expand(text):
    """`text` with every `${NAME}` inside it replaced by its value.

    For URLs and header values that hold a secret among other text
    ("Bearer ${TOKEN}", "https://hooks.example.com/${HOOK_PATH}"). A whole
    `file:/path` is read too: a Slack webhook URL is itself a secret.
    """
    if text.startswith(FILE_PREFIX):
        return _from_file(text.removeprefix(FILE_PREFIX))
    return ENV_REFERENCE.sub(lambda match: _from_environment(match.group(1)), text)


def names_in(text):
    """The environment variables `text` refers to, in order."""
    return ENV_REFERENCE.findall(text)


def _from_environment(name):
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"${{{name}}} is not set in the environment")
    if not value.strip():
        raise ValueError(f"${{{name}}} is set but empty")
    return value


def _from_file(path):
    if not Path(path).is_absolute():
        raise ValueError(f"file:{path}: the path must be absolute (file:/run/secrets/name)")
    try:
        value = Path(path).read_text().strip()
    except OSError as error:
        raise ValueError(f"file:{path}: cannot read it: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ValueError(f"file:{path}: not UTF-8 text") from None
    if not value:
        raise ValueError(f"file:{path} is empty")
    return value
