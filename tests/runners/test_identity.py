import datetime as dt

import pytest

from audit.models import AuditEvent, Counter
from dispatch import claims, identity, polls, refusals
from dispatch import leases as dispatch
from dispatch.loop_steps import update_runner_states
from runners.models import Runner, RunnerToken
from scheduler.models import Execution
from tests.factories import RunnerFactory
from tests.runners.conftest import NOW, pending

LATER = NOW + dt.timedelta(seconds=5)


def register(token, name="build-1", session="s1", now=NOW, **kwargs):
    return identity.register(token, name, session, now, **kwargs)


def claim_for(runner, execution, lease=1):
    Execution.objects.filter(pk=execution.pk).update(
        state=Execution.RUNNING,
        runner=runner,
        session=runner.session,
        lease=lease,
        lease_expires_at=NOW + dt.timedelta(seconds=30),
        claimed_at=NOW,
    )


def test_first_registration_creates_the_runner_bound_to_its_token(token):
    runner, takeover = register(token, labels=["linux", "gpu", "linux"], capacity=4)
    assert takeover is False
    assert runner.token == token
    assert runner.labels == ["gpu", "linux"]
    assert runner.capacity == 4
    assert runner.state == Runner.ONLINE
    assert runner.registered_at == NOW
    assert AuditEvent.objects.filter(action="runner.registered").count() == 1


def test_the_same_name_keeps_its_runner_id_and_the_same_session_is_no_takeover(token):
    first, _ = register(token)
    again, takeover = register(token, labels=["new"])
    assert again.pk == first.pk
    assert takeover is False
    assert again.labels == ["new"]
    assert again.takeover_count == 0


def test_a_new_session_takes_over_and_releases_the_old_sessions_work_at_once(token):
    runner, _ = register(token)
    held = pending()
    claim_for(runner, held)

    again, takeover = register(token, session="s2", now=NOW + dt.timedelta(seconds=5))

    assert takeover is True
    assert again.pk == runner.pk
    assert again.session == "s2"
    assert again.takeover_count == 1
    held.refresh_from_db()
    assert held.state == Execution.LOST
    assert held.lost_reason == "runner_superseded"
    retry = Execution.objects.get(job=held.job, attempt=2)
    assert retry.state == Execution.PENDING
    event = AuditEvent.objects.get(action="runner.takeover")
    assert event.data["old_session"] == "s1"
    assert event.data["released"] == [held.pk]
    counter = Counter.objects.get(name="croniq_runner_takeovers_total")
    assert (counter.labels, counter.value) == ("runner=build-1", 1)


def test_registering_the_current_session_again_keeps_its_work(token):
    runner, _ = register(token)
    held = pending()
    claim_for(runner, held)
    register(token)
    held.refresh_from_db()
    assert held.state == Execution.RUNNING


def test_another_token_cannot_use_a_bound_name_and_the_refusal_is_audited(token):
    register(token)
    intruder, _ = RunnerToken.issue("intruder")
    with pytest.raises(refusals.Forbidden):
        register(intruder, session="evil")
    runner = Runner.objects.get(name="build-1")
    assert runner.session == "s1"
    assert runner.token == token
    event = AuditEvent.objects.get(action="runner.binding_refused")
    assert event.data["token"] == "intruder"


def test_revoking_a_token_frees_the_names_it_bound(token):
    register(token)
    assert identity.revoke(token, NOW) is True
    assert RunnerToken.objects.authenticate("whatever") is None
    successor, _ = RunnerToken.issue("successor")
    runner, takeover = register(successor, session="s2")
    assert runner.token == successor
    assert takeover is True
    assert AuditEvent.objects.filter(action="runnertoken.revoked").count() == 1
    assert identity.revoke(token, NOW) is False


@pytest.mark.parametrize(("takeovers", "flapping"), [(3, False), (4, True)])
def test_takeovers_above_the_threshold_within_the_window_mark_flapping(
    token, settings, takeovers, flapping
):
    settings.CRONIQ_FLAP_THRESHOLD = 3
    settings.CRONIQ_FLAP_WINDOW = 60
    register(token, session="s0")
    for n in range(takeovers):
        register(token, session=f"s{n + 1}", now=NOW + dt.timedelta(seconds=n))
    runner = Runner.objects.get(name="build-1")
    assert runner.flapping is flapping
    assert AuditEvent.objects.filter(action="runner.flapping").exists() is flapping
    if flapping:
        assert runner.flapping_since == NOW + dt.timedelta(seconds=takeovers - 1)


def test_takeovers_spread_beyond_the_window_do_not_mark_flapping(token, settings):
    settings.CRONIQ_FLAP_THRESHOLD = 2
    settings.CRONIQ_FLAP_WINDOW = 60
    register(token, session="s0")
    for n in range(6):
        register(token, session=f"s{n + 1}", now=NOW + dt.timedelta(seconds=61 * n))
    assert Runner.objects.get(name="build-1").flapping is False


def test_flapping_clears_after_a_quiet_window(token, settings):
    settings.CRONIQ_FLAP_THRESHOLD = 1
    settings.CRONIQ_FLAP_WINDOW = 60
    register(token, session="s0")
    register(token, session="s1", now=NOW)
    runner, _ = register(token, session="s2", now=NOW + dt.timedelta(seconds=1))
    assert runner.flapping is True

    assert identity.clear_quiet_flapping(NOW + dt.timedelta(seconds=30)) == 0
    assert identity.clear_quiet_flapping(NOW + dt.timedelta(seconds=62)) == 1

    runner.refresh_from_db()
    assert runner.flapping is False
    assert runner.flapping_since is None
    assert AuditEvent.objects.filter(action="runner.flapping_cleared").count() == 1


def test_current_runner_refuses_unknown_foreign_and_superseded_callers(token):
    runner, _ = register(token)
    other, _ = RunnerToken.issue("other")
    with pytest.raises(refusals.NotFound):
        identity.current_runner(token, runner.pk + 1000, "s1")
    with pytest.raises(refusals.NotFound):
        identity.current_runner(token, 2**70, "s1")
    with pytest.raises(refusals.Forbidden):
        identity.current_runner(other, runner.pk, "s1")
    with pytest.raises(refusals.Conflict):
        identity.current_runner(token, runner.pk, "s0")
    assert identity.current_runner(token, runner.pk, "s1") == runner


def test_authenticate_touches_last_used_at_at_most_once_a_minute(issued):
    token, secret = issued
    assert identity.authenticate(secret, NOW) == token
    identity.authenticate(secret, NOW + dt.timedelta(seconds=30))
    token.refresh_from_db()
    assert token.last_used_at == NOW
    identity.authenticate(secret, NOW + dt.timedelta(seconds=61))
    token.refresh_from_db()
    assert token.last_used_at == NOW + dt.timedelta(seconds=61)
    assert identity.authenticate("crq_wrong", NOW) is None
    assert identity.authenticate("", NOW) is None


def test_a_runner_call_writes_last_seen_at_at_most_once_a_second(token):
    runner, _ = register(token, now=NOW)
    identity.touch(runner, NOW + dt.timedelta(milliseconds=500))
    assert Runner.objects.get(pk=runner.pk).last_seen_at == NOW
    identity.touch(runner, NOW + dt.timedelta(seconds=1))
    assert Runner.objects.get(pk=runner.pk).last_seen_at == NOW + dt.timedelta(seconds=1)


def test_an_offline_runner_that_calls_is_online_at_once(token):
    runner, _ = register(token, now=NOW)
    Runner.objects.filter(pk=runner.pk).update(state=Runner.OFFLINE)
    runner.refresh_from_db()
    identity.touch(runner, NOW + dt.timedelta(milliseconds=10))
    assert Runner.objects.get(pk=runner.pk).state == Runner.ONLINE


@pytest.mark.parametrize(
    ("call", "refusal"),
    [
        ({"secret": "crq_not-a-token"}, refusals.Unauthorized),
        ({"secret": "crq_not-a-token", "runner_id": 424242}, refusals.Unauthorized),
        ({"runner_id": 424242}, refusals.NotFound),
        ({"session": "s0"}, refusals.Conflict),
        ({"other_token": True}, refusals.Forbidden),
    ],
)
def test_caller_refuses_in_the_contracts_order(issued, call, refusal):
    token, secret = issued
    runner, _ = register(token)
    if call.get("other_token"):
        _, secret = RunnerToken.issue("other")
    credential = identity.Credential(call.get("secret", secret))
    with pytest.raises(refusal):
        identity.caller(
            credential, call.get("runner_id", runner.pk), call.get("session", "s1"), NOW
        )


def test_caller_with_a_revoked_token_is_unauthorized(issued):
    token, secret = issued
    runner, _ = register(token)
    RunnerToken.objects.filter(pk=token.pk).update(revoked_at=NOW)
    with pytest.raises(refusals.Unauthorized):
        identity.caller(identity.Credential(secret), runner.pk, "s1", NOW)


def test_caller_answers_the_token_and_runner(issued):
    token, secret = issued
    runner, _ = register(token)
    assert identity.caller(identity.Credential(secret), runner.pk, "s1", NOW) == (token, runner)


def test_drain_and_resume_are_audited_and_idempotent(token):
    runner = RunnerFactory(token=token)
    assert identity.drain(runner, NOW) is True
    assert identity.drain(runner, NOW) is False
    assert Runner.objects.get(pk=runner.pk).state == Runner.DRAINING
    assert identity.resume(runner, NOW) is True
    assert identity.resume(runner, NOW) is False
    assert Runner.objects.get(pk=runner.pk).state == Runner.ONLINE
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["runner.drained", "runner.resumed"]


def test_a_fresh_start_of_the_runner_ends_its_drain(token):
    """A new session is the runner's own fresh start: it takes work again."""
    runner, _ = register(token)
    identity.drain(runner, NOW)
    again, _ = register(token, session="s2")
    assert (again.state, again.drained) == (Runner.ONLINE, False)
    stored = Runner.objects.get(pk=runner.pk)
    assert (stored.state, stored.drained) == (Runner.ONLINE, False)
    event = AuditEvent.objects.filter(action="runner.resumed").get()
    assert (event.actor_name, event.data) == ("build-1", {"reason": "new session"})
    pending(labels=[])
    assert len(claims.claim(again, "s2", 1, NOW)) == 1


def go_offline(runner, settings):
    """The runner misses three heartbeats: the loop's step marks it offline."""
    silent = NOW + dt.timedelta(seconds=3 * settings.CRONIQ_HEARTBEAT_INTERVAL + 1)
    assert update_runner_states(silent) == 1
    assert Runner.objects.get(pk=runner.pk).state == Runner.OFFLINE
    return silent + dt.timedelta(seconds=1)


@pytest.mark.parametrize("comes_back_by", ["heartbeat", "poll", "register"])
def test_a_drain_survives_an_offline_spell(issued, settings, comes_back_by):
    token, secret = issued
    runner, _ = register(token)
    identity.drain(runner, NOW)
    back_at = go_offline(runner, settings)
    pending(now=NOW, labels=[])

    credential = identity.Credential(secret)
    if comes_back_by == "heartbeat":
        dispatch.heartbeat(credential, runner.pk, "s1", [], back_at)
    elif comes_back_by == "poll":
        _, _, handed = polls.first_poll(credential, runner.pk, "s1", None, back_at)
        assert handed.assignments == []
    else:
        again, takeover = register(token, session="s1", now=back_at)
        assert (again.state, takeover) == (Runner.DRAINING, False)

    back = Runner.objects.get(pk=runner.pk)
    assert back.state == Runner.DRAINING
    assert back.last_seen_at == back_at
    assert claims.claim(back, "s1", 1, back_at) == []
    assert Execution.objects.get().state == Execution.PENDING


def test_an_operator_resuming_an_offline_drained_runner_brings_it_back_online(issued, settings):
    token, secret = issued
    runner, _ = register(token)
    identity.drain(runner, NOW)
    back_at = go_offline(runner, settings)
    offline = Runner.objects.get(pk=runner.pk)
    assert identity.resume(offline, back_at) is True
    assert (offline.state, offline.drained) == (Runner.OFFLINE, False)

    dispatch.heartbeat(identity.Credential(secret), runner.pk, "s1", [], back_at)
    assert Runner.objects.get(pk=runner.pk).state == Runner.ONLINE


def test_draining_an_offline_runner_keeps_it_offline_until_it_is_heard_from(issued):
    token, secret = issued
    runner, _ = register(token)
    Runner.objects.filter(pk=runner.pk).update(state=Runner.OFFLINE)
    runner.refresh_from_db()
    assert identity.drain(runner, NOW) is True
    stored = Runner.objects.get(pk=runner.pk)
    assert (stored.state, stored.drained) == (Runner.OFFLINE, True)
    dispatch.heartbeat(identity.Credential(secret), runner.pk, "s1", [], LATER)
    assert Runner.objects.get(pk=runner.pk).state == Runner.DRAINING


def test_forget_releases_the_runners_work_and_deletes_it(token):
    runner, _ = register(token)
    held = pending()
    claim_for(runner, held)
    released = identity.forget(runner, NOW)
    assert [e.pk for e in released] == [held.pk]
    held.refresh_from_db()
    assert held.state == Execution.LOST
    assert held.lost_reason == "runner_forgotten"
    assert not Runner.objects.filter(name="build-1").exists()
    # The machine may come back: it registers as a new runner, with any token.
    other, _ = RunnerToken.issue("other")
    runner, takeover = register(other, session="s9")
    assert takeover is False
