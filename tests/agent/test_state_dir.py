"""The state directory is trusted only when it is the agent's own: a planted
directory or ledger never makes the agent kill a process or overwrite a file.

These run as root where possible (like an agent started with --run-as) and
give files to another uid with os.chown, as another user who got there first.
"""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from croniq_runner.ledger import Ledger, UnsafeStateDir, boot_id, group_members, start_time

ROOT = Path(__file__).resolve().parents[2]
OTHER_UID = 65534  # nobody
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")


@pytest.fixture
def sleeper():
    """A real `sleep` leading its own process group; killed at the end."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield process.pid
    process.kill()
    process.wait()


def plant_ledger(path, pgid):
    """A ledger a dead agent of this boot could have left, naming `pgid`:
    the old agent killed every group listed in one like it."""
    path.write_text(f"boot {boot_id()}\n{pgid} {start_time(pgid)} 7\n")


def open_ledger(directory):
    ledger = Ledger(str(directory))
    try:
        return ledger.open()
    finally:
        ledger.close()


@as_root
def test_a_state_dir_owned_by_another_user_is_refused_and_its_ledgers_not_read(tmp_path, sleeper):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    plant_ledger(state / "jobs-1.ledger", sleeper)
    os.chown(state, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeStateDir) as refused:
        open_ledger(state)
    assert str(refused.value) == (
        f"refusing the state directory {state}: it is owned by uid {OTHER_UID}, "
        f"not by this agent's uid {os.geteuid()}"
    )
    assert group_members(sleeper)
    assert sorted(p.name for p in state.iterdir()) == ["jobs-1.ledger"]


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o702])
def test_a_state_dir_others_may_write_to_is_refused(tmp_path, sleeper, mode):
    state = tmp_path / "state"
    state.mkdir()
    plant_ledger(state / "jobs-1.ledger", sleeper)
    state.chmod(mode)
    with pytest.raises(UnsafeStateDir) as refused:
        open_ledger(state)
    assert str(refused.value) == (
        f"refusing the state directory {state}: its mode {mode:#o} lets its group or "
        f"others write to it (chmod go-w {state})"
    )
    assert group_members(sleeper)


@as_root
def test_a_symlink_to_a_directory_of_another_user_is_refused(tmp_path, sleeper):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    plant_ledger(theirs / "jobs-1.ledger", sleeper)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    (tmp_path / "state").symlink_to(theirs)
    with pytest.raises(UnsafeStateDir, match=f"owned by uid {OTHER_UID}"):
        open_ledger(tmp_path / "state")
    assert group_members(sleeper)


def test_a_new_state_dir_is_created_for_the_agent_alone(tmp_path):
    state = tmp_path / "a" / "state"
    assert open_ledger(state) == []
    info = state.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (os.geteuid(), 0o700)


def test_the_agents_own_ledger_is_readable_by_it_alone(tmp_path):
    ledger = Ledger(str(tmp_path))
    ledger.open()
    try:
        assert Path(ledger.path).stat().st_mode & 0o777 == 0o600
    finally:
        ledger.close()


def test_a_symlinked_ledger_is_ignored_not_followed(tmp_path, sleeper, caplog):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plant_ledger(elsewhere / "list", sleeper)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "jobs-1.ledger").symlink_to(elsewhere / "list")
    with caplog.at_level(logging.WARNING, logger="croniq.runner"):
        assert open_ledger(state) == []
    assert group_members(sleeper)
    assert (elsewhere / "list").exists()
    assert f"ignoring {state / 'jobs-1.ledger'}: a symbolic link" in caplog.text


@as_root
def test_a_ledger_owned_by_another_user_is_ignored(tmp_path, sleeper, caplog):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    plant_ledger(state / "jobs-1.ledger", sleeper)
    os.chown(state / "jobs-1.ledger", OTHER_UID, OTHER_UID)
    with caplog.at_level(logging.WARNING, logger="croniq.runner"):
        assert open_ledger(state) == []
    assert group_members(sleeper)
    assert f"ignoring {state / 'jobs-1.ledger'}: owned by uid {OTHER_UID}" in caplog.text


def test_a_symlink_planted_as_the_agents_own_ledger_is_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    ledger = Ledger(str(state))
    Path(ledger.path).symlink_to(victim)
    with pytest.raises(FileExistsError):
        ledger.open()
    ledger.close()
    assert victim.read_text() == "precious\n"


def run_agent(*args, **env):
    """croniq-runner in its own process, against a server that is never reached."""
    return subprocess.run(
        [sys.executable, "-m", "croniq_runner.agent", "--server", "http://127.0.0.1:9", *args],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "CRONIQ_TOKEN": "t", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@as_root
def test_the_agent_exits_2_naming_a_state_dir_it_does_not_own(tmp_path, sleeper):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    plant_ledger(state / "jobs-1.ledger", sleeper)
    os.chown(state, OTHER_UID, OTHER_UID)
    result = run_agent("--state-dir", str(state))
    assert result.returncode == 2, result.stderr
    assert f"refusing the state directory {state}: it is owned by uid {OTHER_UID}" in result.stderr
    assert group_members(sleeper)


def test_the_agent_refuses_its_default_state_dir_when_others_may_write_to_it(tmp_path):
    state = tmp_path / "croniq-runner" / "box"
    state.mkdir(parents=True)
    state.chmod(0o777)
    result = run_agent("--name", "box", XDG_STATE_HOME=str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert f"refusing the state directory {state}: its mode 0o777" in result.stderr
