"""Why pending work waits, at fixed instants."""

from datetime import UTC, datetime, timedelta

from dispatch import coverage
from dispatch.coverage import Coverage
from runners.models import Runner

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


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
