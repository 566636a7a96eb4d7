"""Triage: runs that exhausted their retries (dead letters), and the
operator's replay and discard."""
