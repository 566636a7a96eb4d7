"""How the supervisor starts a job's program, spawned (no limits, no other
user) or forked (here: under an rlimit): either way as a shell would have
started it, its signals at their default and the agent's pipe not its own,
and a program that cannot start ends the supervisor with 127."""

import os
import signal
import subprocess
import sys

import pytest

from croniq_runner.job import SUPERVISOR

# No options: spawned. An rlimit is set by the forked child before its exec.
WAYS = {"spawned": [], "forked": ["--rlimit", "cpu", "3600"]}


def supervise(options, *command, keep=()):
    """Run the supervisor as the agent does, `keep` fds passed to it too;
    (exit code, output, lifeline fd)."""
    read_end, write_end = os.pipe()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", SUPERVISOR, str(read_end), "1", *options, "--", *command],
            capture_output=True, text=True, pass_fds=(read_end, *keep), start_new_session=True,
            timeout=30,
        )  # fmt: skip
    finally:
        os.close(read_end)
        os.close(write_end)
    return done.returncode, done.stdout + done.stderr, read_end


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc/self/status")
@pytest.mark.parametrize("way", WAYS)
def test_the_job_gets_sigpipe_and_sigxfsz_at_their_default(way):
    code, out, _ = supervise(WAYS[way], "sh", "-c", "grep SigIgn /proc/self/status")
    assert code == 0, out
    ignored = int(out.split()[1], 16)
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & (1 << (signum - 1)), f"{signum.name} ignored: {out}"


@pytest.mark.parametrize("way", WAYS)
def test_a_pipeline_cut_short_ends_quietly(way):
    code, out, _ = supervise(WAYS[way], "sh", "-c", "yes | head -n 1")
    assert (code, out) == (0, "y\n")  # no "yes: standard output: Broken pipe"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
@pytest.mark.parametrize("way", WAYS)
def test_the_agents_pipe_is_not_open_in_the_job(way):
    code, out, lifeline = supervise(WAYS[way], "sh", "-c", "ls /proc/self/fd")
    assert code == 0, out
    assert str(lifeline) not in out.split()


@pytest.mark.parametrize("way", WAYS)
def test_a_program_that_cannot_start_ends_the_supervisor_with_127(tmp_path, way):
    code, out, _ = supervise(WAYS[way], str(tmp_path / "missing"))
    assert code == 127
    assert "croniq-runner: cannot start the job:" in out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc/self/fd")
@pytest.mark.parametrize("way", WAYS)
def test_the_read_end_of_the_jobs_output_is_the_supervisors_alone(way):
    # The supervisor keeps it to drain once the agent is gone; in the job
    # it would keep a reader on the job's own output forever.
    read_end, write_end = os.pipe()
    try:
        options = ["--output", str(read_end), *WAYS[way]]
        code, out, _ = supervise(options, "sh", "-c", "ls /proc/self/fd", keep=(read_end,))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert code == 0, out
    assert str(read_end) not in out.split()
