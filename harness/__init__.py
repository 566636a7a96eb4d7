"""Starting Croniq's real processes for tests and benchmarks.

The web server, the scheduler loop and `manage.py` commands on a database of
their own (processes), agents installed from the runner's wheel
(runner_venv), a TCP proxy that partitions them (tcp_proxy), a PostgreSQL
server a test may stop (private_postgres) and a webhook receiver that
checks signatures (hooks). tests/ and bench/ both use them; nothing here
imports either.
"""
