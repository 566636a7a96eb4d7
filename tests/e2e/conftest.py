import pytest

from harness.processes import Server, drop_database, migrated_database, on_postgres
from harness.runner_venv import runner_venv

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="session", autouse=True)
def runner_from_wheel():
    """Build (or find) the runner's virtualenv before the first test, not
    inside a test that times its agent: every agent runs from the wheel."""
    return runner_venv()


@pytest.fixture
def e2e_database(tmp_path):
    """A migrated database of its own, outside pytest-django's test database."""
    url = migrated_database(tmp_path)
    yield url
    drop_database(url)


@pytest.fixture
def server(e2e_database, tmp_path):
    process = Server(e2e_database, tmp_path / "web.log").wait_ready()
    yield process
    process.stop()


@pytest.fixture
def layout(request):
    """How the web server and the scheduler loop run: "split" (uvicorn and
    scheduler_loop) unless a test asks for both with
    `@pytest.mark.parametrize("layout", LAYOUTS, indirect=True)`."""
    layout = getattr(request, "param", "split")
    if layout == "serve" and on_postgres():
        pytest.skip("serve is the one-process install on SQLite; PostgreSQL runs the split")
    return layout
