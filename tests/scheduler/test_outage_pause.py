"""A scheduler loop in a database outage tries again often enough to follow
a failover's new primary within seconds (docs/design.md §16)."""

from scheduler.firing.loop import outage_pause


def test_pauses_double_from_half_a_second_up_to_five_seconds():
    pauses = [outage_pause(0.0)]
    while len(pauses) < 12:
        pauses.append(outage_pause(pauses[-1]))
    assert pauses[:4] == [0.5, 1.0, 2.0, 4.0]
    # A failover's new primary is reached at most 5 s after it takes writes.
    assert pauses[4:] == [5.0] * 8
