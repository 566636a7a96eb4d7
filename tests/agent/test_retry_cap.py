"""croniq-runner tries a server that did not answer again at least every 5 s,
so it is back at work within seconds of a database failover."""

from croniq_runner.timing import Backoff


def test_an_unanswered_call_is_tried_again_within_five_seconds():
    backoff = Backoff(rand=lambda: 1.0)
    pauses = [backoff.next_delay() for _ in range(12)]
    assert pauses[:4] == [0.5, 1.0, 2.0, 4.0]
    assert pauses[4:] == [5.0] * 8
