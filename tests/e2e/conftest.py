import pytest

from tests.e2e.processes import Server, create_database, drop_database, manage
from tests.runner_venv import runner_from_wheel  # noqa: F401 (every agent runs from the wheel)

pytestmark = pytest.mark.e2e


@pytest.fixture
def e2e_database(tmp_path):
    """A migrated database of its own, outside pytest-django's test database."""
    url = create_database(tmp_path)
    manage(url, "migrate", "--no-input")
    yield url
    drop_database(url)


@pytest.fixture
def server(e2e_database, tmp_path):
    process = Server(e2e_database, tmp_path / "web.log").wait_ready()
    yield process
    process.stop()
