"""Croniq's overrides of Django's own machinery, and the switch back to stock.

Each override was measured and kept because it pays (its module says by how
much), and each reaches past Django's documented API somewhere: a private
method, a handler's internals, a compiler. So each one is

- fenced: it lives in the one module named below, and only there;
- switchable: CRONIQ_STOCK_DJANGO names the overrides that make way for
  Django's own behaviour (`all` for every one), to tell whether a fault is
  Croniq's or Django's, or to run on a Django release before it is verified;
- guarded: on a Django release it has not been verified with, an override
  that reads private internals steps aside by itself, with one warning
  logged, instead of failing in the middle of a request.

| name | where | stock Django in its place |
| --- | --- | --- |
| asgi_handler | croniq_project/asgi_handler.py | `ASGIHandler` for runner calls too |
| middleware | croniq_project/middleware.py | the stock middleware classes |
| middleware_list | croniq_project/middleware_list.py | a plain MIDDLEWARE list |
| sqlite_write_lock | croniq_project/sqlite/base.py | SQLite's busy handler for every connection |
| job_reader | scheduler/firing/ticks.py (`read_jobs`) | `Job.objects.raw` |

Verifying a new Django release: run the unit tier on it (`make
test-django-latest` for the newest) with every override on, then add the
release to VERIFIED below.
"""

import importlib.metadata
import logging
from collections.abc import Collection

import django
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

# The Django releases (major, minor) the overrides that read Django's private
# internals were verified with.
VERIFIED_DJANGO = ((5, 2), (6, 1))
# StaticFilesMiddleware reads WhiteNoise's internals (`files`, `find_file`,
# `serve`): the WhiteNoise major releases it was verified with.
VERIFIED_WHITENOISE = (6,)

# {name: whether it reads private internals (then it is version-guarded)}
OVERRIDES = {
    "asgi_handler": True,
    "middleware": True,
    "middleware_list": False,
    "sqlite_write_lock": True,
    "job_reader": True,
}

ALL = "all"


def stock_from_env(value: str | None) -> frozenset[str]:
    """CRONIQ_STOCK_DJANGO's value -> the set of overrides turned off.

    Empty or unset: none. `all`: every one. Otherwise names from OVERRIDES,
    comma-separated; an unknown name stops start-up."""
    names = {name.strip().lower() for name in (value or "").split(",") if name.strip()}
    if ALL in names:
        return frozenset(OVERRIDES)
    unknown = sorted(names - set(OVERRIDES))
    if unknown:
        raise ImproperlyConfigured(
            f"CRONIQ_STOCK_DJANGO: unknown override {', '.join(unknown)}; "
            f"expected `all` or some of {', '.join(OVERRIDES)}"
        )
    return frozenset(names)


def in_use(name: str, stock: Collection[str] | None = None) -> bool:
    """Whether the override `name` is on: not switched off (`stock`, by
    default settings.CRONIQ_STOCK_DJANGO) and verified with the installed
    Django (and WhiteNoise)."""
    if name not in OVERRIDES:
        raise KeyError(name)
    if stock is None:
        from django.conf import settings

        stock = settings.CRONIQ_STOCK_DJANGO
    if name in stock:
        return False
    reason = unverified(name)
    if reason is not None:
        warn_once(name, reason)
        return False
    return True


def unverified(
    name: str,
    django_version: tuple[int | str, ...] | None = None,
    whitenoise_version: str | None = None,
) -> str | None:
    """Why the override `name` must not run on these versions (by default the
    installed ones), or None when it was verified with them."""
    if not OVERRIDES[name]:
        return None
    django_version = django_version or django.VERSION
    if tuple(django_version[:2]) not in VERIFIED_DJANGO:
        shown = ".".join(map(str, django_version[:2]))
        return f"not verified with Django {shown}"
    if name == "middleware":
        whitenoise_version = whitenoise_version or installed_version("whitenoise")
        major = int(whitenoise_version.split(".")[0])
        if major not in VERIFIED_WHITENOISE:
            return f"not verified with WhiteNoise {whitenoise_version}"
    return None


def installed_version(package: str) -> str:
    return importlib.metadata.version(package)


WARNED = set()


def warn_once(name: str, reason: str) -> None:
    if name in WARNED:
        return
    WARNED.add(name)
    log.warning(
        "framework override %s is off: %s; Django's own behaviour is used "
        "(core/framework_overrides.py)",
        name,
        reason,
    )
