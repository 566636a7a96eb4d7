"""How croniq-runner ends: its exit codes, and the error that carries one
out of the agent.

0 done (also after SIGTERM/SIGINT and a drain), 2 usage error (also when the
server refuses the registration as invalid), 3 the token was refused, 4
another process took over this runner's identity, 1 an error nothing above
expected.
"""

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_UNAUTHORIZED = 3
EXIT_SUPERSEDED = 4


class Fatal(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
