"""croniq-runner: the agent that runs Croniq's jobs on a machine (docs/design.md §4
and §5). Standard library and requests only: no Django, no server code.

The version is the server's too (both pyproject.toml files carry it); it
goes to the server in the registration and in the User-Agent.
"""

__version__ = "0.3.0"
