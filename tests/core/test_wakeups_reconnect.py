"""The process's LISTEN connection, lost, tries again often enough to reach a
failover's new primary within seconds (docs/design.md §16)."""

from core import wakeups


def test_pauses_between_tries_double_up_to_five_seconds():
    pauses = [wakeups.FIRST_RECONNECT_PAUSE]
    while len(pauses) < 10:
        pauses.append(wakeups.next_pause(pauses[-1]))
    assert pauses[:4] == [0.5, 1.0, 2.0, 4.0]
    assert pauses[4:] == [5.0] * 6
