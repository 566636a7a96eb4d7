import io

import pytest

from croniq_runner.cli import main
from tests.cli.scripted_server import Scripted


@pytest.fixture
def api():
    server = Scripted()
    yield server
    server.stop()


@pytest.fixture
def croniq(api):
    """Run `croniq ARGS` against the scripted server, `stdin` its standard
    input (a str, or a file object): (exit code, out, err)."""

    def run(*argv, environ=None, stdin=""):
        out, err = io.StringIO(), io.StringIO()
        environ = {"CRONIQ_SERVER": api.url, "CRONIQ_API_KEY": "crk_test"} | (environ or {})
        stdin = io.StringIO(stdin) if isinstance(stdin, str) else stdin
        code = main(list(argv), environ=environ, out=out, err=err, stdin=stdin)
        return code, out.getvalue(), err.getvalue()

    return run
