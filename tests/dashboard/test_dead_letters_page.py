"""The Dead letters page: the open ones with their reason and log tail, a
force box on stale ones, and replay and discard buttons that act, audited
with the user; the admin's list and actions likewise."""

import datetime as dt

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.urls import reverse

from audit.models import AuditEvent
from scheduler.models import Execution
from scheduler.triage.dead_letters import DeadLetter
from tests.factories import ExecutionFactory, JobFactory

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 6, 1, 2, 30, tzinfo=dt.UTC)
SOON = T0 + dt.timedelta(hours=1)
STALE = T0 + dt.timedelta(days=8)


@pytest.fixture
def root_client(client):
    client.force_login(get_user_model().objects.create_superuser("root", password=None))
    return client


def dead_letter(job_name, **fields):
    execution = ExecutionFactory(
        job=JobFactory(name=job_name), scheduled_for=T0, state=Execution.FAILED
    )
    return DeadLetter.objects.create(
        execution=execution, reason="failed", detail="exit code 2",
        log_tail="Traceback: disk full", landed_at=T0, **fields,
    )  # fmt: skip


def test_the_page_lists_open_dead_letters_with_their_log_tail(root_client):
    dead_letter("billing-sync")
    dead_letter("old-report", discarded_at=T0)
    with time_machine.travel(SOON, tick=False):
        page = root_client.get(reverse("dashboard:dead-letters")).content.decode()
    assert "billing-sync" in page and "Traceback: disk full" in page
    assert "old-report" not in page
    assert 'name="force"' not in page  # not stale yet
    assert f'href="{reverse("dashboard:dead-letters")}" aria-current="page"' in page  # the nav
    with time_machine.travel(SOON, tick=False):
        discarded = root_client.get(reverse("dashboard:dead-letters"), {"status": "discarded"})
    assert "old-report" in discarded.content.decode()


def test_a_stale_dead_letter_offers_force(root_client):
    dead_letter("billing-sync")
    with time_machine.travel(STALE, tick=False):
        page = root_client.get(reverse("dashboard:dead-letters")).content.decode()
    assert 'name="force"' in page


def test_replay_runs_the_instant_again_and_goes_to_the_new_run(root_client):
    letter = dead_letter("billing-sync")
    url = reverse("dashboard:dead-letter-replay", args=[letter.pk])
    with time_machine.travel(SOON, tick=False):
        answer = root_client.post(url)
    new = Execution.objects.get(trigger=Execution.REPLAY)
    assert (new.scheduled_for, new.attempt) == (T0, 2)
    assert answer["Location"] == reverse("dashboard:execution", args=[new.pk])
    assert AuditEvent.objects.get(action="deadletter.replay").actor_name == "root"


def test_a_stale_replay_without_force_is_refused_with_a_message(root_client):
    letter = dead_letter("billing-sync")
    url = reverse("dashboard:dead-letter-replay", args=[letter.pk])
    with time_machine.travel(STALE, tick=False):
        answer = root_client.post(url, follow=True)
        assert "stale replay" in answer.content.decode()
        assert not Execution.objects.filter(trigger=Execution.REPLAY).exists()
        root_client.post(url, {"force": "on"})
    assert Execution.objects.filter(trigger=Execution.REPLAY).count() == 1


def test_discard_one_and_selected(root_client):
    letters = [dead_letter(name) for name in ("a", "b", "c")]
    root_client.post(reverse("dashboard:dead-letter-discard", args=[letters[0].pk]))
    answer = root_client.post(
        reverse("dashboard:dead-letters-discard"),
        {"ids": [str(letters[1].pk), "junk", str(letters[0].pk)]},
        follow=True,
    )
    assert "Discarded 1 dead letter(s)." in answer.content.decode()
    statuses = [DeadLetter.objects.get(pk=each.pk).status for each in letters]
    assert statuses == ["discarded", "discarded", "open"]
    assert AuditEvent.objects.filter(action="deadletter.discard").count() == 2


def test_discarding_none_selected_says_so_and_changes_nothing(root_client):
    letter = dead_letter("a")
    answer = root_client.post(reverse("dashboard:dead-letters-discard"), follow=True)
    assert "select the dead letters to discard" in answer.content.decode()
    letter.refresh_from_db()
    assert letter.status == DeadLetter.OPEN


def test_the_admin_lists_filters_and_replays(root_client):
    letter = dead_letter("billing-sync")
    dead_letter("old-report", discarded_at=T0)
    changelist = reverse("admin:scheduler_deadletter_changelist")
    listed = root_client.get(changelist, {"status": "open"}).content.decode()
    assert "billing-sync" in listed and "old-report" not in listed
    detail = root_client.get(reverse("admin:scheduler_deadletter_change", args=[letter.pk]))
    assert "Traceback: disk full" in detail.content.decode()
    with time_machine.travel(STALE, tick=False):
        refused = root_client.post(
            changelist, {"action": "replay", "_selected_action": [letter.pk]}, follow=True
        )
    assert "stale replay" in refused.content.decode().lower()  # the admin capitalises
    assert not Execution.objects.filter(trigger=Execution.REPLAY).exists()
    with time_machine.travel(SOON, tick=False):
        root_client.post(changelist, {"action": "replay", "_selected_action": [letter.pk]})
    assert Execution.objects.filter(trigger=Execution.REPLAY).count() == 1
