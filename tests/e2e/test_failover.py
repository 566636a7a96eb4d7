"""Croniq follows a PostgreSQL primary failover (docs/design.md §16): with the
web server, the scheduler loop and an agent on the multi-host URL of a
primary and its synchronous standby, the primary is killed and the standby
promoted as soon as the loop has seen it gone. Scheduling resumes within
15 s; nothing runs twice; nothing the server acknowledged is lost
(harness/failover.py says what is checked).

Two kills: the server crashes (its port refuses at once), or its machine is
lost (every packet dropped: connections and queries hang until the host
list's timeouts give up; needs iptables, as root)."""

import pytest

from harness import failover
from harness.private_postgres import postgres_bin
from harness.processes import drop_database, migrated_database, on_postgres
from harness.replica import can_drop_packets

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL server binaries not installed"),
]

RESUMES_WITHIN = 15.0  # seconds


@pytest.fixture
def schema(tmp_path):
    """A migrated database on the suite's server, for the pair to copy."""
    if not on_postgres():
        pytest.skip("runs in the PostgreSQL pass of the suite")
    url = migrated_database(tmp_path)
    yield url
    drop_database(url)


@pytest.mark.parametrize("lost", [False, True], ids=["server-crash", "machine-lost"])
def test_croniq_follows_a_failover_and_neither_loses_nor_repeats_a_run(lost, schema, tmp_path):
    if lost and not can_drop_packets():
        pytest.skip("dropping a port's packets needs iptables, as root")
    outcome = failover.run(tmp_path, schema_from=schema, unreachable=lost)
    logs = "\n".join(
        f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(tmp_path.glob("*.log"))
    )
    assert outcome.acknowledged, logs
    promoted = outcome.promoted_after
    assert outcome.first_fire - promoted <= RESUMES_WITHIN, logs
    assert outcome.first_dispatch - promoted <= RESUMES_WITHIN, logs
    if not lost:  # promoted within a second: within 15 s of the kill too
        assert max(outcome.first_fire, outcome.first_dispatch) <= RESUMES_WITHIN, logs
    assert outcome.instants > 3 * len(failover.JOBS)
    assert not outcome.violations(), "\n".join(outcome.violations()) + "\n" + logs
