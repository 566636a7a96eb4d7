"""Loaded with -p before Django is set up (see pyproject.toml)."""

import os

# The suite runs with a throwaway key; production refuses to start without one.
os.environ.setdefault("SECRET_KEY", "croniq-test-only-key")
if os.environ.get("CRONIQ_TEST_DATABASE_URL"):
    os.environ["DATABASE_URL"] = os.environ["CRONIQ_TEST_DATABASE_URL"]
# A web application built in a test (serve, uvicorn) starts no stall watch
# thread against the test database; tests/e2e/test_stall_watch.py turns it on.
os.environ.setdefault("CRONIQ_STALL_WATCH", "0")
# Loops started by the suite deliver no notifications (a notifier process
# per loop is CPU the timing tests need); the notification tests turn it on.
os.environ.setdefault("CRONIQ_NOTIFIER", "0")
# Channels refuse loopback receivers unless allowed; the suite's receivers
# listen on 127.0.0.1 (in its own processes too). Tests of the refusal set
# the allow-list empty.
os.environ.setdefault("CRONIQ_NOTIFY_ALLOW_NETS", "127.0.0.0/8")
