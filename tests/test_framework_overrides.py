"""Croniq's framework overrides (core/framework_overrides.py): each one makes
way for stock Django when CRONIQ_STOCK_DJANGO names it, or by itself on a
Django release it was not verified with, and Croniq still works then."""

import asyncio
import datetime as dt
import logging

import django
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import ConnectionHandler
from django.utils.module_loading import import_string

from core import framework_overrides
from core.framework_overrides import OVERRIDES, in_use, stock_from_env, unverified
from croniq_project.asgi_handler import CroniqASGIHandler
from croniq_project.database import database_from_url
from croniq_project.middleware_list import STOCK_MIDDLEWARE, InstalledMiddleware, middleware_setting
from scheduler.firing import ticks
from tests.factories import JobFactory

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
UNVERIFIED_DJANGO = (9, 9, 0, "final", 0)


@pytest.fixture
def unverified_django(monkeypatch):
    """The installed Django claims a release no override was verified with."""
    monkeypatch.setattr(django, "VERSION", UNVERIFIED_DJANGO)
    monkeypatch.setattr(framework_overrides, "WARNED", set())


# -- the switch and the guard ------------------------------------------------


def test_the_switch_names_overrides_or_all():
    assert stock_from_env(None) == frozenset()
    assert stock_from_env("") == frozenset()
    assert stock_from_env("all") == frozenset(OVERRIDES)
    assert stock_from_env(" asgi_handler, Middleware ") == {"asgi_handler", "middleware"}


def test_an_unknown_override_stops_start_up():
    with pytest.raises(ImproperlyConfigured, match="CRONIQ_STOCK_DJANGO: unknown override asgi"):
        stock_from_env("asgi")


def test_every_override_is_on_by_default_on_this_django():
    assert all(in_use(name, stock=frozenset()) for name in OVERRIDES)


def test_an_override_switched_off_is_not_in_use(settings):
    settings.CRONIQ_STOCK_DJANGO = frozenset({"job_reader"})
    assert not in_use("job_reader")
    assert in_use("asgi_handler")


def test_overrides_of_private_internals_are_verified_per_django_release():
    assert unverified("asgi_handler", django_version=(5, 2, 19)) is None
    assert unverified("asgi_handler", django_version=(6, 1, 0)) is None
    assert unverified("asgi_handler", django_version=(6, 2, 0)) == "not verified with Django 6.2"
    # The list subclass reads nothing private: any release.
    assert unverified("middleware_list", django_version=(6, 2, 0)) is None
    # StaticFilesMiddleware reads WhiteNoise's internals too.
    assert unverified("middleware", (5, 2), "6.12.0") is None
    assert unverified("middleware", (5, 2), "7.0") == "not verified with WhiteNoise 7.0"


def test_on_an_unverified_django_the_overrides_step_aside_with_one_warning(
    unverified_django, caplog
):
    with caplog.at_level(logging.WARNING, logger="core.framework_overrides"):
        assert not in_use("sqlite_write_lock", stock=frozenset())
        assert not in_use("sqlite_write_lock", stock=frozenset())
    assert [r.getMessage() for r in caplog.records] == [
        "framework override sqlite_write_lock is off: not verified with Django 9.9; "
        "Django's own behaviour is used (core/framework_overrides.py)"
    ]
    assert in_use("middleware_list", stock=frozenset())


# -- asgi_handler ------------------------------------------------------------


def asgi_get(path):
    """Status and body of one GET through the project's ASGI handler, and
    whether its lean runner path answered."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "server": ("testserver", 80), "client": ("127.0.0.1", 5000),
        "headers": [(b"host", b"localhost")],
    }  # fmt: skip
    sent, lean = [], []
    received = asyncio.Event()

    async def receive():
        if not received.is_set():
            received.set()
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never hangs up

    async def send(message):
        sent.append(message)

    class Handler(CroniqASGIHandler):
        async def handle_runner_call(self, scope, receive, send):
            lean.append(scope["path"])
            await super().handle_runner_call(scope, receive, send)

    asyncio.run(Handler()(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]["status"], body, bool(lean)


@pytest.mark.django_db(transaction=True)
def test_runner_calls_take_the_lean_path_by_default():
    status, body, lean = asgi_get("/api/v1/runners/1/no-such-call")
    assert (status, lean) == (404, True)
    assert body == b'{"detail": "Not Found"}'


@pytest.mark.django_db(transaction=True)
def test_with_the_asgi_handler_off_django_answers_runner_calls(settings):
    settings.CRONIQ_STOCK_DJANGO = frozenset({"asgi_handler"})
    status, body, lean = asgi_get("/api/v1/runners/1/no-such-call")
    assert (status, lean) == (404, False)
    assert body == b'{"detail": "Not Found"}'
    assert asgi_get("/healthz")[0] == 200


@pytest.mark.django_db(transaction=True)
def test_on_an_unverified_django_the_handler_is_djangos(unverified_django):
    assert not CroniqASGIHandler().lean


# -- middleware and middleware_list --------------------------------------------


CRONIQ_MIDDLEWARE = list(STOCK_MIDDLEWARE)


def test_each_croniq_middleware_stands_for_the_stock_one_it_subclasses():
    for croniq, stock in STOCK_MIDDLEWARE.items():
        assert issubclass(import_string(croniq), import_string(stock)), croniq


def test_with_the_middleware_off_settings_name_the_stock_middleware():
    paths = middleware_setting(CRONIQ_MIDDLEWARE, frozenset({"middleware"}))
    assert paths == list(STOCK_MIDDLEWARE.values())
    assert "django.middleware.security.SecurityMiddleware" in paths


def test_with_the_list_off_middleware_is_a_plain_list():
    on = middleware_setting(CRONIQ_MIDDLEWARE, frozenset())
    off = middleware_setting(CRONIQ_MIDDLEWARE, frozenset({"middleware_list"}))
    assert isinstance(on, InstalledMiddleware)
    assert type(off) is list and off == CRONIQ_MIDDLEWARE
    # What Django's deploy checks ask: only the list subclass answers for subclasses.
    assert "django.middleware.security.SecurityMiddleware" in on
    assert "django.middleware.security.SecurityMiddleware" not in off


def test_on_an_unverified_django_the_settings_name_the_stock_middleware(unverified_django):
    paths = middleware_setting(CRONIQ_MIDDLEWARE, frozenset())
    assert paths == list(STOCK_MIDDLEWARE.values())
    assert isinstance(paths, InstalledMiddleware)  # reads nothing private: stays


@pytest.mark.django_db(transaction=True)
def test_the_stock_middleware_serve_the_api_static_files_and_the_admin(settings):
    settings.CRONIQ_STOCK_DJANGO = frozenset(OVERRIDES)
    settings.MIDDLEWARE = middleware_setting(CRONIQ_MIDDLEWARE, settings.CRONIQ_STOCK_DJANGO)
    status, body, lean = asgi_get("/api/v1/no-such-call")
    assert (status, body, lean) == (404, b'{"detail": "Not Found"}', False)
    # Django's handler warns for each file WhiteNoise streams (what
    # StaticFilesMiddleware avoids), then sends it whole.
    with pytest.warns(Warning, match="must consume synchronous iterators"):
        status, body, _ = asgi_get("/static/admin/css/base.css")
    assert status == 200 and b"body" in body
    assert asgi_get("/admin/login/")[0] == 302  # to the login page
    assert asgi_get("/accounts/login/")[0] == 200


# -- sqlite_write_lock -----------------------------------------------------------


def sqlite_connection(path, django_db_blocker):
    config = database_from_url(f"sqlite:///{path}")
    with django_db_blocker.unblock():
        return ConnectionHandler({"default": config})["default"]


def test_with_the_write_lock_off_an_eager_connection_begins_as_django_does(
    settings, tmp_path, django_db_blocker
):
    settings.CRONIQ_STOCK_DJANGO = frozenset({"sqlite_write_lock"})
    eager = sqlite_connection(tmp_path / "locks.sqlite3", django_db_blocker)
    eager.eager_write_lock = True
    assert not eager.eager_allowed

    def not_the_override():
        raise AssertionError("the eager path ran")

    eager.busy_timeout = not_the_override  # the override's first step
    with django_db_blocker.unblock():
        with eager.cursor() as cursor:
            cursor.execute("CREATE TABLE t (n integer)")
        eager._start_transaction_under_autocommit()  # what atomic() calls
        assert eager.connection.in_transaction
        with eager.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (1)")
            cursor.execute("COMMIT")
            cursor.execute("SELECT n FROM t")
            assert cursor.fetchall() == [(1,)]
        eager.close()


def test_by_default_an_eager_connection_may_take_the_lock_eagerly(tmp_path, django_db_blocker):
    connection = sqlite_connection(tmp_path / "locks.sqlite3", django_db_blocker)
    assert connection.eager_allowed


# -- job_reader --------------------------------------------------------------------


@pytest.mark.django_db
def test_with_the_job_reader_off_the_orm_reads_the_locked_jobs(settings):
    due = JobFactory(next_run_at=T0 - dt.timedelta(seconds=1), labels=["linux"], env={"N": 3})
    JobFactory(next_run_at=T0 + dt.timedelta(hours=1))
    [read] = ticks.lock_due_jobs(T0)
    settings.CRONIQ_STOCK_DJANGO = frozenset({"job_reader"})
    [stock] = ticks.lock_due_jobs(T0)
    assert stock.pk == read.pk == due.pk
    for field in type(due)._meta.concrete_fields:
        assert getattr(stock, field.attname) == getattr(read, field.attname), field.name
