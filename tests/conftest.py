import pytest


@pytest.fixture(autouse=True, scope="session")
def quick_settings():
    """Two settings that cost CPU in every test and are not what the tests
    are about:

    - Users are created and logged in with a one-iteration PBKDF2
      (tests/hashers.py): the stock 1,000,000 iterations cost a third of a
      second of CPU each time, in hundreds of tests.
    - WhiteNoise finds a static file when it is asked for
      (WHITENOISE_AUTOREFRESH) instead of indexing every app's static files
      when its middleware is made: a test client makes the middleware again
      for each client, and the index cost 31 ms of CPU each time, about a
      tenth of the suite. A server the suite starts as a process keeps the
      production settings (tests/e2e)."""
    from django.test.utils import override_settings

    with override_settings(
        PASSWORD_HASHERS=["tests.hashers.QuickPBKDF2PasswordHasher"],
        WHITENOISE_AUTOREFRESH=True,
    ):
        yield


@pytest.fixture(autouse=True)
def no_wakeups_left():
    """Each test starts with no wake-up listener of the process
    (`core.wakeups`): the subscriptions a test made (a loop's, a hub's)
    end with it."""
    yield
    from core import wakeups

    if wakeups._listener is not None:
        wakeups.reset()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, which drops the test database at the end; PostgreSQL
    refuses to drop a database in use. First the runner calls' database
    threads close their connections, and the sessions of the processes the
    last tests stopped end (a backend outlives its client by a moment)."""
    yield
    from core import db_threads, wakeups

    wakeups.reset()
    db_threads.close_connections()
    with django_db_blocker.unblock():
        end_other_sessions()


def end_other_sessions(patience=10.0):
    """PostgreSQL: wait up to `patience` seconds for the other sessions on
    the test database to end, then end those left (a process a test
    started and lost). Nothing on SQLite."""
    import time

    from django.db import connection

    if connection.vendor != "postgresql":
        return
    others = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + patience
    with connection.cursor() as cursor:
        while True:
            cursor.execute(others)
            left = [pid for (pid,) in cursor.fetchall()]
            if not left:
                return
            if time.monotonic() > deadline:
                cursor.execute(f"SELECT pg_terminate_backend(pid) FROM ({others}) AS other")
                return
            time.sleep(0.05)


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts with an empty cache (the dashboard keeps its
    heat-map a minute): one test's pages never show another's rows."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def no_stray_notifier(monkeypatch):
    """A loop ticked by a test starts no notifier thread (it would outlive
    the test); tests of the notifier start theirs, stopped afterwards."""
    from notifications import notifier

    monkeypatch.setattr(notifier, "AUTOSTART", False)
    yield
    notifier.stop_all()


@pytest.fixture
def exported_spans():
    """Spans exported while the test runs, kept in memory
    (core.tracing with the SDK's in-memory exporter), as `Span`s read back."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from core import tracing

    exporter = InMemorySpanExporter()
    tracing.install(SimpleSpanProcessor(exporter))
    yield exporter
    tracing.reset()


# -- tests without a database run in one pass -------------------------------

# What makes a test depend on the backend: a database fixture, or a marker of
# tests that start processes on the test's database.
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup"}
BACKEND_MARKERS = {"django_db", "e2e", "chaos", "postgres", "docker"}


def uses_the_database(item):
    if DATABASE_FIXTURES & set(item.fixturenames):
        return True
    return any(item.get_closest_marker(name) for name in BACKEND_MARKERS)


def drives_a_browser(item):
    return "chromium" in item.fixturenames


def pytest_collection_modifyitems(config, items):
    """`make test` runs the suite on SQLite and on PostgreSQL. A test that
    touches no database (cron parsing, the agent, the CLI's arguments) would
    run the same code twice: it runs in the SQLite pass only. So does a test
    that drives the dashboard in Chromium: what it checks is the page's
    script and layout, and the views behind them run on both backends in
    the Django-client tests (tests/dashboard); each browser test costs
    seconds of CPU the other pass's timing tests need."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    once = [item for item in items if not uses_the_database(item) or drives_a_browser(item)]
    if once:
        config.hook.pytest_deselected(items=once)
        chosen = {id(item) for item in once}
        items[:] = [item for item in items if id(item) not in chosen]
