from croniq_runner.timing import LeaseBook, fence_margin


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


def test_margin_is_a_third_of_the_ttl_at_most_ten_seconds():
    assert fence_margin(3) == 1.0
    assert fence_margin(30) == 10.0
    assert fence_margin(600) == 10.0


def test_a_lease_is_overdue_ttl_minus_margin_after_the_renewing_heartbeat_was_sent():
    clock = FakeClock()
    book = LeaseBook(lease_ttl=30, clock=clock)
    book.renewed(7, sent_at=clock.now)
    clock.now += 19.9
    assert book.overdue() == []
    assert round(book.remaining(7), 6) == 0.1
    clock.now += 0.1
    assert book.overdue() == [7]


def test_each_renewal_pushes_the_deadline():
    clock = FakeClock()
    book = LeaseBook(lease_ttl=3, clock=clock)
    book.renewed(1, sent_at=clock.now)
    for _ in range(10):
        clock.now += 1.0
        book.renewed(1, sent_at=clock.now)
        assert book.overdue() == []
    clock.now += 2.0
    assert book.overdue() == [1]


def test_a_late_answer_to_an_older_heartbeat_does_not_move_the_deadline_back():
    clock = FakeClock()
    book = LeaseBook(lease_ttl=30, clock=clock)
    book.renewed(1, sent_at=1010.0)
    book.renewed(1, sent_at=1000.0)
    assert book.remaining(1, now=1000.0) == 30.0


def test_forgotten_leases_are_never_overdue():
    clock = FakeClock()
    book = LeaseBook(lease_ttl=3, clock=clock)
    book.renewed(1, sent_at=clock.now)
    book.renewed(2, sent_at=clock.now)
    book.forget(1)
    clock.now += 100
    assert book.overdue() == [2]
    assert book.remaining(1) is None


def test_a_shorter_ttl_applies_to_later_renewals_and_a_longer_one_is_ignored():
    clock = FakeClock()
    book = LeaseBook(lease_ttl=30, clock=clock)
    assert not book.shorten(60)
    assert book.shorten(9)
    assert (book.lease_ttl, book.margin) == (9, 3)
    book.renewed(1, sent_at=clock.now)
    assert book.remaining(1) == 6
