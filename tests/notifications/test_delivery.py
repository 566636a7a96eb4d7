"""Delivering due notifications (notifications.delivery): claims, the delivery
log, backoff, giving up, the counters, and the admin's test message. Real
HTTP receivers, real databases, fixed instants."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction

from audit.models import AuditEvent, Counter
from harness.hooks import SECRET, Hook
from notifications import delivery, delivery_log
from notifications.models import Delivery, Notification
from tests.notifications.factories import NOW, SECRET_VARIABLE, counted, notification, webhook

GIVE_UP = 3600.0


@pytest.fixture(autouse=True)
def hook_secret(monkeypatch, settings):
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    settings.CRONIQ_NOTIFY_GIVE_UP = GIVE_UP
    # One lane runs in the test's thread, inside its transaction; the tests
    # of concurrency commit (transaction=True) and ask for more.
    settings.CRONIQ_NOTIFY_WORKERS = 1


@pytest.fixture
def hook():
    server = Hook(now=lambda: NOW.timestamp())
    yield server
    server.close()


def later(seconds):
    return NOW + timedelta(seconds=seconds)


def test_backoff_doubles_from_one_second_up_to_ten_minutes():
    assert [delivery_log.backoff(n) for n in range(1, 12)] == [
        1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 600,
    ]  # fmt: skip
    assert delivery_log.backoff(500) == 600


def test_a_due_notification_is_delivered_and_logged(db, hook):
    sent = notification(webhook(hook.url))

    started = time.perf_counter()  # the clock the try's latency is read on
    assert delivery.deliver_due(NOW) == 1
    took = time.perf_counter() - started

    sent.refresh_from_db()
    assert sent.state == Notification.DELIVERED
    assert (sent.delivered_at, sent.last_status, sent.attempts) == (NOW, 200, 1)
    assert (sent.claimed_until, sent.claimed_by) == (None, "")
    [request] = hook.received
    assert request["verified"] and request["delivery"] == str(sent.pk)
    assert request["body"]["id"] == str(sent.pk)
    [row] = Delivery.objects.filter(notification=sent)
    assert (row.attempt, row.ok, row.status_code, row.at, row.error) == (1, True, 200, NOW, "")
    assert 0 < row.latency <= took  # in seconds, the try's own


def test_delivery_moves_the_counter_and_the_latency_histogram(db, hook):
    channel = webhook(hook.url)
    notification(channel)
    notification(channel)

    delivery.deliver_due(NOW)

    assert counted(channel) == 2
    assert Counter.objects.value_of(f"{delivery_log.LATENCY}__count") == 2
    assert Counter.objects.value_of(f"{delivery_log.LATENCY}__sum_us") > 0


def test_nothing_due_yet_is_left_alone(db, hook):
    waiting = notification(webhook(hook.url), next_attempt_at=later(5))

    assert delivery.deliver_due(NOW) == 0
    assert delivery.next_due_at(NOW) == later(5)
    assert hook.received == []
    waiting.refresh_from_db()
    assert waiting.state == Notification.PENDING


def test_a_disabled_channel_keeps_its_notifications_pending(db, hook):
    held = notification(webhook(hook.url, enabled=False))

    assert delivery.deliver_due(NOW) == 0
    held.refresh_from_db()
    assert (held.state, held.attempts) == (Notification.PENDING, 0)


def test_failures_are_retried_after_1_2_4_seconds_with_the_same_delivery_id(db):
    hook = Hook(statuses=[500], now=lambda: NOW.timestamp())
    try:
        channel = webhook(hook.url)
        failing = notification(channel)
        schedule = []
        now = NOW
        for _ in range(4):
            assert delivery.deliver_due(now) == 1
            failing.refresh_from_db()
            schedule.append((failing.next_attempt_at - now).total_seconds())
            assert delivery.deliver_due(now) == 0  # not due again before its backoff
            now = failing.next_attempt_at
    finally:
        hook.close()

    assert schedule == [1, 2, 4, 8]
    assert (failing.state, failing.attempts, failing.last_status) == ("pending", 4, 500)
    assert failing.last_error.startswith("HTTP 500")
    assert set(hook.ids()) == {str(failing.pk)}
    rows = Delivery.objects.filter(notification=failing).order_by("attempt")
    assert [(r.attempt, r.ok, r.status_code) for r in rows] == [
        (n, False, 500) for n in (1, 2, 3, 4)
    ]
    assert counted(channel, outcome="failed") == 4
    assert counted(channel, outcome="delivered") == 0


def test_a_notification_failing_past_give_up_is_given_up_audited_and_counted(db):
    hook = Hook(statuses=[503], now=lambda: NOW.timestamp())
    try:
        channel = webhook(hook.url)
        old = notification(channel, created_at=NOW - timedelta(seconds=GIVE_UP - 0.5))
        delivery.deliver_due(NOW)
        old.refresh_from_db()
        assert old.state == Notification.PENDING  # younger than the give-up age
        delivery.deliver_due(old.next_attempt_at)
    finally:
        hook.close()

    old.refresh_from_db()
    assert (old.state, old.attempts, old.next_attempt_at) == (Notification.GIVEN_UP, 2, None)
    [audit] = AuditEvent.objects.filter(action="notification.given_up")
    assert audit.target_id == str(old.pk)
    assert audit.data["channel"] == "ops-hook" and audit.data["attempts"] == 2
    assert audit.data["last_status"] == 503
    assert counted(channel, outcome="given_up") == 1
    assert counted(channel, outcome="failed") == 2
    assert delivery.deliver_due(later(3600)) == 0


def test_an_unset_secret_is_a_failed_try_naming_the_variable(db, hook, monkeypatch):
    monkeypatch.delenv(SECRET_VARIABLE)
    broken = notification(webhook(hook.url))

    assert delivery.deliver_due(NOW) == 1

    broken.refresh_from_db()
    assert broken.state == Notification.PENDING and broken.attempts == 1
    assert broken.next_attempt_at == later(1)
    assert SECRET_VARIABLE in broken.last_error and broken.last_error.startswith("configuration")
    [row] = broken.deliveries.all()
    assert not row.ok and row.status_code is None and SECRET_VARIABLE in row.error
    assert hook.received == []


def test_the_secret_never_reaches_the_log_or_the_audit_trail(db, monkeypatch):
    """A receiver that echoes the secret in its error page: the delivery log
    and the give-up audit show its status, never its answer."""
    hook = Hook(statuses=[500], now=lambda: NOW.timestamp(), secret=None)
    hook.echo = "X-Echo"
    try:
        channel = webhook(hook.url, headers={"X-Echo": f"${{{SECRET_VARIABLE}}}"})
        echoing = notification(channel, created_at=NOW - timedelta(seconds=GIVE_UP + 1))
        delivery.deliver_due(NOW)
    finally:
        hook.close()

    assert hook.received[0]["echoed"] == SECRET  # the receiver did answer with it
    echoing.refresh_from_db()
    assert echoing.state == Notification.GIVEN_UP
    assert echoing.last_error == "HTTP 500"
    texts = [echoing.last_error, *echoing.deliveries.values_list("error", flat=True)]
    texts += [str(event.data) for event in AuditEvent.objects.all()]
    assert all(SECRET not in text for text in texts)


# -- claims ----------------------------------------------------------------------


def test_a_claimed_notification_is_not_claimed_again_until_its_lease_lapses(db, hook):
    channel = webhook(hook.url, timeout=2.0)
    held = notification(channel)

    [first] = delivery.claim(NOW, owner="loop-a")
    assert first.until == later(2.0 + delivery.LEASE_MARGIN)
    assert delivery.claim(NOW, owner="loop-b") == []
    assert delivery.deliver_due(later(5), owner="loop-b") == 0

    # loop-a died mid-send: once the lease lapsed, loop-b takes over.
    assert delivery.deliver_due(first.until, owner="loop-b") == 1
    held.refresh_from_db()
    assert held.state == Notification.DELIVERED
    assert hook.ids() == [str(held.pk)]  # the same Croniq-Delivery id
    # loop-a comes back with its lapsed claim: its result is not written.
    assert delivery_log.record(held, first, delivery.channels.Result(False, 500), NOW) is None
    assert held.deliveries.count() == 1


@pytest.fixture
def postgres_only(transactional_db):
    if connection.vendor != "postgresql":
        pytest.skip(
            "racing connections need PostgreSQL: the SQLite test database (shared-cache "
            "memory) refuses concurrent writers; tests/e2e race real processes on a file"
        )


def test_a_second_notifier_does_not_deliver_what_another_holds(postgres_only, hook):
    """Two notifiers (threads with their own connections) deliver 40
    notifications at once: every one is sent exactly once."""
    channel = webhook(hook.url)
    rows = [notification(channel) for _ in range(40)]
    tried = []

    def notifier(owner):
        try:
            tried.append(delivery.deliver_due(NOW, owner=owner, workers=4))
        finally:
            connection.close()

    threads = [threading.Thread(target=notifier, args=(f"loop-{n}",)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert sum(tried) == 40
    assert sorted(hook.ids()) == sorted(str(row.pk) for row in rows)
    assert Delivery.objects.count() == 40
    assert Notification.objects.filter(state=Notification.DELIVERED).count() == 40


def test_postgres_skips_a_notification_being_claimed_without_waiting(postgres_only, hook):
    held = notification(webhook(hook.url))
    locked = threading.Event()
    release = threading.Event()

    def claimer_in_the_middle_of_its_claim():
        try:
            with transaction.atomic():
                list(Notification.objects.select_for_update().filter(pk=held.pk))
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=claimer_in_the_middle_of_its_claim)
    thread.start()
    try:
        assert locked.wait(5)
        # Skipped, not waited for: a claim that waited for the row would get
        # it once the holder gives up (10 s), and claim it.
        assert delivery.claim(NOW, owner="other") == []
    finally:
        release.set()
        thread.join(10)
    assert [claim.id for claim in delivery.claim(NOW, owner="other")] == [held.pk]


# -- the admin's test message ------------------------------------------------------


def test_send_test_delivers_through_the_delivery_log_and_is_audited(db, hook, admin_user):
    channel = webhook(hook.url)

    result = delivery.send_test(channel, NOW, admin_user)

    assert result.ok and result.status_code == 200
    [request] = hook.received
    assert request["verified"] and request["event"] == "test"
    assert request["body"]["summary"] == "Test notification from Croniq"
    [sent] = Notification.objects.filter(name="test")
    assert request["delivery"] == str(sent.pk)
    assert (sent.state, sent.attempts) == (Notification.DELIVERED, 1)
    assert sent.deliveries.get().ok
    [audit] = AuditEvent.objects.filter(action="notification.test")
    assert audit.actor_name == admin_user.username and audit.data["ok"] is True
    assert audit.target_id == str(channel.pk)


def test_a_failing_test_message_says_why_and_is_not_retried(db, admin_user):
    hook = Hook(statuses=[404], now=lambda: NOW.timestamp())
    try:
        result = delivery.send_test(webhook(hook.url), NOW, admin_user)
    finally:
        hook.close()

    assert not result.ok and result.status_code == 404
    [sent] = Notification.objects.filter(name="test")
    assert sent.state == Notification.GIVEN_UP and sent.next_attempt_at is None
    assert AuditEvent.objects.get(action="notification.test").data["status_code"] == 404
    assert not AuditEvent.objects.filter(action="notification.given_up").exists()
    assert delivery.deliver_due(later(60)) == 0


def test_the_receiver_rejects_the_delivered_request_with_its_body_tampered(db, hook):
    """The signature covers the raw body: the same headers over a changed
    body fail `channels.verify`."""
    import requests

    notification(webhook(hook.url))
    delivery.deliver_due(NOW)
    [genuine] = hook.received
    assert genuine["verified"]

    tampered = genuine["raw"].replace(b"billing-sync", b"billing-evil")
    headers = {
        "Content-Type": "application/json",
        "Croniq-Signature": genuine["signature"],
        "Croniq-Delivery": genuine["delivery"],
    }
    answer = requests.post(hook.url, data=tampered, headers=headers, timeout=5)
    assert answer.status_code == 401
    assert hook.received[-1]["verified"] is False


def test_a_stopping_lane_gives_back_what_it_claimed_but_did_not_try(db, hook, monkeypatch):
    channel = webhook(hook.url)
    rows = [notification(channel, created_at=NOW + timedelta(microseconds=n)) for n in range(3)]
    stopping = threading.Event()
    deliver = delivery.deliver

    def deliver_while_a_stop_arrives(claimed, now, retry=True):
        stopping.set()  # SIGTERM during the first try of the batch
        return deliver(claimed, now, retry)

    monkeypatch.setattr(delivery, "deliver", deliver_while_a_stop_arrives)
    tried = delivery.deliver_in_turn(lambda: NOW, "loop-a", delivery.Budget(10), stopping)
    monkeypatch.undo()

    assert tried == 1
    for row in rows:
        row.refresh_from_db()
    assert [(row.state, row.claimed_until) for row in rows] == [
        ("delivered", None), ("pending", None), ("pending", None),
    ]  # fmt: skip
    assert delivery.deliver_due(NOW) == 2  # due again at once, for any notifier


def test_tries_written_together_keep_each_outcome_and_move_each_series_once(db):
    channel = webhook("http://127.0.0.1:9/")
    ok, lost, failed = notification(channel), notification(channel), notification(channel)
    claims = delivery.claim(NOW, count=3, owner="loop-a")
    by_id = {claimed.id: claimed for claimed in claims}
    Notification.objects.filter(pk=lost.pk).update(claimed_by="someone-else")
    answered = delivery.channels.Result(True, 200, "", 0.02)
    refused = delivery.channels.Result(False, 503, "HTTP 503", 0.3)
    tries = [
        delivery_log.Tried(row, by_id[row.pk], result, NOW)
        for row, result in ((ok, answered), (lost, answered), (failed, refused))
    ]

    outcomes = delivery_log.record_many(tries)

    assert outcomes == [delivery_log.DELIVERED, None, delivery_log.FAILED]
    assert Notification.objects.get(pk=ok.pk).state == Notification.DELIVERED
    assert Notification.objects.get(pk=lost.pk).attempts == 0
    assert Notification.objects.get(pk=failed.pk).next_attempt_at == later(1)
    assert sorted(Delivery.objects.values_list("notification", flat=True)) == sorted(
        [ok.pk, failed.pk]
    )
    assert counted(channel) == 1
    assert counted(channel, outcome="failed") == 1
    assert Counter.objects.value_of(f"{delivery_log.LATENCY}__count") == 2
    assert Counter.objects.value_of(f"{delivery_log.LATENCY}__sum_us") == 320_000
    assert Counter.objects.filter(name=f"{delivery_log.LATENCY}__bucket").count() == 2


def test_a_batch_claim_leases_each_notification_past_the_tries_before_it(db):
    slow = webhook("http://127.0.0.1:9/", name="slow", timeout=3.0)
    quick = webhook("http://127.0.0.1:9/", name="quick", timeout=1.0)
    first = notification(slow, created_at=NOW)
    second = notification(quick, created_at=NOW + timedelta(microseconds=1))

    claims = delivery.claim(NOW, count=2, owner="loop-a")

    assert [claimed.id for claimed in claims] == [first.pk, second.pk]
    # Sent one after another: the second may wait for the first's timeout.
    assert claims[1].until >= later(3.0 + 1.0 + delivery.LEASE_MARGIN)
    assert delivery.claim(NOW, count=2, owner="loop-b") == []
    assert delivery.claim(claims[1].until, count=2, owner="loop-b") != []


def test_the_recorder_writes_what_has_queued_in_one_batch_and_a_try_alone_at_once(db, hook):
    channel = webhook(hook.url)
    for _ in range(5):
        notification(channel)
    recorder = delivery.Recorder()  # not started: the test takes its batches
    for claimed in delivery.claim(NOW, count=5):
        recorder.put(delivery.attempt(claimed, NOW))

    batch = recorder.take()
    assert len(batch) == 5
    recorder.write(batch)
    assert Notification.objects.filter(state=Notification.DELIVERED).count() == 5

    notification(channel)
    [claimed] = delivery.claim(NOW)
    recorder.put(delivery.attempt(claimed, NOW))
    recorder.put(None)  # closing: what came before is written, nothing after
    assert len(recorder.take()) == 2
    assert Notification.objects.filter(state=Notification.PENDING).count() == 1


def test_the_recorder_caps_a_batch(db, monkeypatch):
    monkeypatch.setattr(delivery, "MOST_PER_WRITE", 3)
    recorder = delivery.Recorder()
    for n in range(7):
        recorder.put(n)
    assert [len(recorder.take()) for _ in range(3)] == [3, 3, 1]


@pytest.mark.parametrize(
    ("waiting", "workers", "plan"),
    [(0, 8, 0), (3, 8, (3, 1)), (4, 2, (2, 2)), (5, 2, (2, 3)), (40, 8, (8, 4))],
)
def test_due_work_is_spread_over_the_free_lanes(db, waiting, workers, plan):
    channel = webhook("http://127.0.0.1:9/")
    for _ in range(waiting):
        notification(channel)
    lanes, batch = delivery.lane_plan(NOW, workers)
    assert (lanes if plan == 0 else (lanes, batch)) == plan


def test_a_claim_running_out_is_when_its_notification_comes_due_again(db, hook):
    # A notifier that died holding it: the others look again when its claim
    # ends, not at their next poll.
    channel = webhook(hook.url)
    notification(channel, next_attempt_at=later(30))
    held = notification(channel, next_attempt_at=NOW)
    Notification.objects.filter(pk=held.pk).update(claimed_until=later(8), claimed_by="dead:1/x")

    assert delivery.next_due_at(NOW) == later(8)
    assert delivery.next_due_at(later(8)) == later(30)
