"""`Authorization: Bearer <api key>` for the management API (docs/design.md §8).

An unknown, revoked or expired key, or a runner token, is 401; a key without
the call's scope is 403 `needs scope ...`, before the view runs, so a refused
call changes nothing. A call made with `any_key()` takes every usable key
(creating a key: it checks the caller's reach itself).
"""

from datetime import datetime, timedelta

from django.http import HttpRequest
from django.utils import timezone
from ninja.errors import HttpError
from ninja.security import HttpBearer

from audit.models import AuditEvent
from control.models import ApiKey
from core.db_threads import run_db

# last_used_at is informational: written at most this often per key.
TOUCH_INTERVAL = timedelta(minutes=1)


class ApiKeyAuth(HttpBearer):
    # /api/docs names the scheme after the class ("ApiKeyAuth"), beside the
    # runner protocol's "RunnerAuth".
    openapi_description = "An API key (docs/design.md §8): `Authorization: Bearer crk_...`."

    def __init__(self, *scopes, in_db_thread=False):
        super().__init__()
        self.scopes = scopes
        # For an async view (ninja awaits what `__call__` returns): the key
        # is looked up in one of the runner API's database threads, which
        # keep their connections, not in a thread of Django's.
        self.is_async = in_db_thread

    def __call__(self, request):
        if self.is_async:
            return run_db(super().__call__, request)
        return super().__call__(request)

    @property
    def scope(self) -> str | list[str] | None:
        """What the call needs: a scope, a list when it needs several, None
        when any usable key may make it."""
        if not self.scopes:
            return None
        return self.scopes[0] if len(self.scopes) == 1 else list(self.scopes)

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        now = timezone.now()
        key = ApiKey.objects.authenticate(token.strip(), now)
        if key is None:
            return None
        for scope in self.scopes:
            if not key.allows(scope):
                raise HttpError(403, f"needs scope {scope}")
        note_use(key, now)
        return key


def needs(scope: str) -> ApiKeyAuth:
    """The `auth=` of a call that needs `scope`."""
    return ApiKeyAuth(scope)


def needs_all(*scopes: str) -> ApiKeyAuth:
    """The `auth=` of a call that needs every one of `scopes` (apply writes
    jobs and calendars); a key missing one is told the first it lacks."""
    return ApiKeyAuth(*scopes)


def needs_in_db_thread(scope: str) -> ApiKeyAuth:
    """`needs(scope)` for an async view whose steps run in `run_db`."""
    return ApiKeyAuth(scope, in_db_thread=True)


def any_key() -> ApiKeyAuth:
    """The `auth=` of a call any usable key may make."""
    return ApiKeyAuth()


def require(key: ApiKey, scope: str) -> None:
    """For a call whose scope depends on what it is asked (apply with
    channels): 403 `needs scope ...`, as the bearer check answers, unless
    `key` holds `scope`. Call it before the view changes anything."""
    if not key.allows(scope):
        raise HttpError(403, f"needs scope {scope}")


def note_use(key: ApiKey, now: datetime) -> None:
    if key.last_used_at is None or now - key.last_used_at >= TOUCH_INTERVAL:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)


def actor(key: ApiKey) -> tuple[str, str]:
    """The audit actor of a call made with `key`: the key's name."""
    return (AuditEvent.API_KEY, key.name)
