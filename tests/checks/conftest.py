import pytest

from core import db_threads


@pytest.fixture(autouse=True)
def steps_see_the_test_rows():
    """The ping view runs its database step in a database thread; in these
    tests on the test's thread, where its transaction holds the rows."""
    with db_threads.steps_in_caller_thread():
        yield
