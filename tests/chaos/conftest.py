import pytest

from harness.runner_venv import runner_venv


@pytest.fixture(scope="session", autouse=True)
def runner_from_wheel():
    """Build (or find) the runner's virtualenv before the first test, not
    inside a test that times its agent: every agent runs from the wheel."""
    return runner_venv()
