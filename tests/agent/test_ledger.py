"""The ledger of job process groups, with real processes: what a dead agent
left running is ended; what a live agent runs, or an id reused since, is not."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from croniq_runner import ledger as ledger_module
from croniq_runner.ledger import Ledger, group_members, start_time

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def groups():
    """Start `sleep` process groups (each its own session); all killed at the end."""
    started = []

    def start():
        process = subprocess.Popen(["sleep", "60"], start_new_session=True)
        started.append(process)
        return process.pid

    yield start
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture
def new_ledger(tmp_path):
    """This process's Ledger in tmp_path, closed at the end."""
    ledgers = []

    def make():
        ledgers.append(Ledger(str(tmp_path)))
        return ledgers[-1]

    yield make
    for ledger in ledgers:
        ledger.close()


def alive(pgid):
    return bool(group_members(pgid))


def record(state_dir, *entries, then="exit"):
    """A separate process keeps a ledger of `entries` (pgid, execution id),
    then dies without cleaning up ("exit") or stays alive ("stay")."""
    code = textwrap.dedent(
        f"""
        import os, sys
        from croniq_runner.ledger import Ledger
        ledger = Ledger({str(state_dir)!r})
        ledger.open()
        for pgid, execution_id in {list(entries)!r}:
            ledger.add(pgid, execution_id)
        if {then!r} == "exit":
            os._exit(0)
        print("ready", flush=True)
        sys.stdin.read()
        """
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    if then == "exit":
        process.communicate(timeout=20)
        assert process.returncode == 0
    else:
        assert process.stdout.readline() == b"ready\n"
    return process


def test_the_groups_a_dead_agent_left_are_ended_before_the_next_one_starts(
    tmp_path, groups, new_ledger, monkeypatch
):
    # Each killed group is waited for until it is gone, at most
    # LEFTOVER_WAIT: made long, the open ends well before one such wait
    # only if the killed `sleep`s (zombies until this process reaps them)
    # count as gone.
    monkeypatch.setattr(ledger_module, "LEFTOVER_WAIT", 60.0)
    first, second = groups(), groups()
    record(tmp_path, (first, 11), (second, 12))
    assert alive(first) and alive(second)
    ledger = new_ledger()
    started = time.monotonic()
    assert sorted(ledger.open()) == sorted([first, second])
    assert time.monotonic() - started < ledger_module.LEFTOVER_WAIT / 2
    assert not alive(first) and not alive(second)
    # Its ledger is gone; this agent's own one is the only file left.
    assert [p.name for p in tmp_path.iterdir()] == [f"jobs-{os.getpid()}.ledger"]
    ledger.close()
    assert list(tmp_path.iterdir()) == []


def test_the_jobs_of_an_agent_still_running_are_left_alone(tmp_path, groups, new_ledger):
    pgid = groups()
    owner = record(tmp_path, (pgid, 5), then="stay")
    try:
        assert new_ledger().open() == []
        assert alive(pgid)
    finally:
        owner.communicate(b"", timeout=10)


def test_a_group_id_reused_by_another_process_is_not_killed(tmp_path, groups, new_ledger):
    pgid = groups()
    (tmp_path / "jobs-1.ledger").write_text(
        Path("/proc/sys/kernel/random/boot_id").read_text().strip().join(["boot ", "\n"])
        + f"{pgid} {int(start_time(pgid)) - 1} 5\n"
    )
    assert new_ledger().open() == []
    assert alive(pgid)


def test_a_ledger_from_before_a_reboot_is_dropped(tmp_path, groups, new_ledger):
    pgid = groups()
    (tmp_path / "jobs-1.ledger").write_text(f"boot another-boot\n{pgid} {start_time(pgid)} 5\n")
    assert new_ledger().open() == []
    assert alive(pgid)
    assert not (tmp_path / "jobs-1.ledger").exists()


def test_a_job_ended_leaves_the_ledger(tmp_path, groups, new_ledger):
    pgid = groups()
    ledger = new_ledger()
    ledger.open()
    ledger.add(pgid, 3)
    path = Path(ledger.path)
    assert path.read_text().splitlines()[1] == f"{pgid} {start_time(pgid)} 3"
    ledger.remove(pgid)
    assert len(path.read_text().splitlines()) == 1
    ledger.close()
