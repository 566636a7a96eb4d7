# The runner token fixtures of the claim tests.
from tests.runners.conftest import issued, secret, token  # noqa: F401
