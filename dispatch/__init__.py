"""Handing work to runners and taking their reports: the runner protocol's
HTTP API, registration and takeover, the long-poll and its hub, claims,
leases (heartbeat, logs, finish, hand-back), and the loop's steps that reap
dead leases and settle runner states (docs/design.md §4). The runners
themselves (the Runner and RunnerToken rows) are the `runners` app's, below
the scheduler, so an execution can name the runner that holds it."""
