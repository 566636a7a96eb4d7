"""A system check that fails while the context is open, for the tests of
which commands run the checks."""

import contextlib

from django.core import checks


@contextlib.contextmanager
def a_failing_system_check(*tags: str):
    """`tests.E001`, in the families `tags` (none: only `check` runs it)."""

    def broken(app_configs, **kwargs):
        return [checks.Error("broken on purpose", id="tests.E001")]

    checks.register(broken, *tags)
    try:
        yield
    finally:
        checks.registry.registry.registered_checks.discard(broken)
