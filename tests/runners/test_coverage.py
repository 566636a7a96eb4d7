"""Why pending work waits, and how quiet a runner looks, at fixed instants."""

from datetime import UTC, datetime, timedelta

import pytest

from dispatch import coverage
from dispatch.coverage import Coverage, liveness
from runners.models import Runner

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BEAT = timedelta(seconds=10)


def runner(pk, name, labels, state=Runner.ONLINE, drained=False, capacity=1):
    return Runner(pk=pk, name=name, labels=labels, state=state, drained=drained, capacity=capacity)


def test_a_runner_carries_a_job_when_it_has_all_of_its_labels():
    assert coverage.carries(["linux", "gpu"], ["gpu"])
    assert coverage.carries(["linux"], [])
    assert coverage.carries(None, None)
    assert not coverage.carries(["linux"], ["linux", "gpu"])


def test_labels_no_runner_ever_carried_name_the_labels_the_online_ones_have():
    runners = Coverage(
        [
            runner(1, "a", ["linux"]),
            runner(2, "b", ["linux", "docker"]),
            runner(3, "c", []),
            runner(4, "d", ["gpu-old"], state=Runner.OFFLINE),
        ]
    )
    why = runners.why_waiting(["gpu"], NOW, NOW)
    assert why == (
        "unknown",
        "no runner with labels gpu has been seen; 3 runners online: docker, linux",
    )


def test_with_no_runner_at_all_it_says_so():
    assert Coverage([]).why_waiting([], NOW, NOW).text == (
        "no runner has registered yet; no runner is online"
    )
    assert Coverage([]).why_waiting(["gpu"], NOW, NOW).text == (
        "no runner with labels gpu has been seen; no runner is online"
    )


def test_carriers_that_are_offline_or_draining_are_named():
    runners = Coverage(
        [
            runner(1, "gpu-1", ["gpu"], state=Runner.OFFLINE),
            runner(2, "gpu-2", ["gpu", "linux"], state=Runner.DRAINING, drained=True),
            runner(3, "gpu-3", ["gpu"], state=Runner.OFFLINE, drained=True),
            runner(4, "web", ["linux"]),
        ]
    )
    assert runners.why_waiting(["gpu"], NOW, NOW) == (
        "unavailable",
        "the runners with labels gpu are offline or draining: "
        "gpu-1 offline, gpu-2 draining, gpu-3 draining",
    )


def test_busy_carriers_say_how_full_they_are():
    runners = Coverage(
        [runner(1, "gpu-1", ["gpu"], capacity=2), runner(2, "gpu-2", ["gpu"])],
        running={1: 2, 2: 1},
    )
    assert runners.why_waiting(["gpu"], NOW, NOW) == (
        "busy",
        "the 2 runners with labels gpu are busy: 3 of 3 slots in use",
    )


def test_carriers_with_room_take_it_at_their_next_poll():
    runners = Coverage([runner(1, "gpu-1", ["gpu"], capacity=2)], running={1: 1})
    assert runners.why_waiting(["gpu"], NOW, NOW) == (
        "free",
        "the 1 runner with labels gpu has 1 free slot; it starts at the next poll",
    )


def test_work_not_ready_yet_says_until_when():
    runners = Coverage([runner(1, "gpu-1", ["gpu"])], running={})
    later = NOW + timedelta(seconds=90)
    assert runners.why_waiting(["gpu"], later, NOW) == (
        "not_yet",
        "it waits until 2026-11-30 12:01:30 UTC",
    )


def test_only_labels_no_registered_runner_carries_are_warned_about():
    runners = Coverage([runner(1, "gpu-1", ["gpu"], state=Runner.OFFLINE)])
    warnings = coverage.label_warnings(
        [("train", ["gpu"]), ("render", ["gpu", "cuda"]), ("any", [])], runners
    )
    assert warnings == [
        "job render: no runner with labels cuda, gpu has been seen;"
        " its runs wait until one registers"
    ]


@pytest.mark.parametrize(
    ("seconds", "kind"),
    [
        (0, "fresh"),
        (10, "fresh"),  # the next heartbeat is due just now
        (15, "fresh"),
        (15.5, "quiet"),  # one heartbeat missed
        (30, "quiet"),
        (30.5, "silent"),  # past the offline threshold, not marked yet
    ],
)
def test_a_runner_turns_quiet_after_one_missed_heartbeat(seconds, kind):
    seen = NOW - timedelta(seconds=seconds)
    assert liveness(Runner.ONLINE, seen, NOW, BEAT).kind == kind
    assert liveness(Runner.DRAINING, seen, NOW, BEAT).kind == kind


def test_an_offline_runner_is_offline_whatever_its_age():
    assert liveness(Runner.OFFLINE, NOW, NOW, BEAT).kind == "offline"


def test_a_last_seen_in_the_future_counts_as_now():
    assert liveness(Runner.ONLINE, NOW + timedelta(seconds=3), NOW, BEAT).age == timedelta(0)


def test_the_default_interval_is_the_heartbeat_setting(settings):
    settings.CRONIQ_HEARTBEAT_INTERVAL = 2.0
    assert liveness(Runner.ONLINE, NOW - timedelta(seconds=4), NOW).kind == "quiet"
    assert coverage.offline_after() == timedelta(seconds=6)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s ago"), (17.9, "17 s ago"), (60, "1 min ago"), (7199, "1 h ago"), (90000, "1 d ago")],
)
def test_ages_read_in_whole_units(seconds, text):
    assert coverage.ago(timedelta(seconds=seconds)) == text
