"""croniq-runner: the reference runner agent.

Imports only the standard library and requests, so it runs on any machine.
"""

import sys


def main(argv=None):
    print(
        "usage: croniq-runner --server URL --token TOKEN [--name N] [--labels a,b] [--capacity N]",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
