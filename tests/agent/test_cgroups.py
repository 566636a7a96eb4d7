"""Where the agent makes its runs' cgroups (cgroups.py, docs/design.md §15),
read from /proc as the kernel writes it, on file trees made to look like
the machines it meets: pure cgroup v2 (a container's namespace, a systemd
service with and without delegation), v1, and the hybrid of both."""

import os

import pytest

from croniq_runner import cgroups
from croniq_runner.cgroups import Cgroups, Place, RunCgroup, mounts, own_cgroups

HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = """\
9:name=systemd:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
"""


def test_mountinfo_and_proc_cgroup_are_read_as_the_kernel_writes_them():
    found = mounts(HYBRID_MOUNTINFO)
    assert [(m.version, m.path, m.root) for m in found] == [
        (1, "/sys/fs/cgroup/cpu", "/"),
        (1, "/sys/fs/cgroup/cpuacct", "/"),
        (1, "/sys/fs/cgroup/memory", "/"),
        (1, "/sys/fs/cgroup/systemd", "/"),
        (2, "/sys/fs/cgroup/unified", "/"),
    ]
    assert "memory" in found[2].controllers
    assert own_cgroups(HYBRID_CGROUP) == {
        "name=systemd": "/",
        "memory": "/process_api/abc",
        "cpuacct": "/",
        "cpu": "/",
        "2": "/",
    }
    shared = own_cgroups("5:cpu,cpuacct:/docker/x\n0::/init.scope (deleted)\n")
    assert shared == {"cpu": "/docker/x", "cpuacct": "/docker/x", "2": "/init.scope"}


class Machine:
    """A /proc and cgroup file systems in a temporary directory."""

    def __init__(self, root):
        self.root = root
        (root / "proc" / "self").mkdir(parents=True)

    def mount(self, lines, cgroup):
        text = "".join(
            f"{n} 1 0:{n} {inside} {self.root / point} rw - {kind} {kind} rw{extra}\n"
            for n, (inside, point, kind, extra) in enumerate(lines, start=30)
        )
        (self.root / "proc" / "self" / "mountinfo").write_text(text)
        (self.root / "proc" / "self" / "cgroup").write_text(cgroup)

    def cgroup(self, path, **files):
        directory = self.root / path
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (directory / name.replace("_", ".", 1)).write_text(text)
        return directory

    def probe(self, pid=4242):
        return Cgroups.probe(proc=str(self.root / "proc"), pid=pid)


@pytest.fixture
def machine(tmp_path):
    return Machine(tmp_path)


def test_v2_with_the_memory_controller_given_to_children_holds_both(machine):
    machine.mount([("/", "cg", "cgroup2", "")], "0::/croniq.service\n")
    base = machine.cgroup("cg/croniq.service", cgroup_subtree_control="cpu memory\n")
    found = machine.probe()
    assert (found.memory, found.cpu) == (Place(2, str(base)), Place(2, str(base)))


def test_v2_delegated_the_agent_alone_moves_into_a_leaf_and_turns_memory_on(machine, monkeypatch):
    machine.mount([("/", "cg", "cgroup2", "")], "0::/\n")  # a container's namespace
    base = machine.cgroup(
        "cg", cgroup_controllers="cpu memory\n", cgroup_subtree_control="", cgroup_procs="4242\n"
    )
    found = machine.probe(pid=4242)
    assert found.memory == Place(2, str(base))
    assert (base / "croniq-agent" / "cgroup.procs").read_text() == "4242"
    assert (base / "cgroup.subtree_control").read_text() == "+memory"


def test_v2_not_the_agents_to_manage_counts_cpu_but_limits_no_memory(machine):
    # A systemd service without Delegate=yes: writable as root, not delegated.
    machine.mount([("/", "cg", "cgroup2", "")], "0::/system.slice/croniq.service\n")
    base = machine.cgroup(
        "cg/system.slice/croniq.service", cgroup_controllers="cpu memory\n",
        cgroup_subtree_control="", cgroup_procs="4242\n",
    )  # fmt: skip
    found = machine.probe()
    assert (found.memory, found.cpu) == (None, Place(2, str(base)))
    assert (base / "cgroup.subtree_control").read_text() == ""  # left as it was
    assert not (base / "croniq-agent").exists()


def test_v2_shared_with_other_processes_is_left_as_it_is(machine):
    machine.mount([("/", "cg", "cgroup2", "")], "0::/\n")
    base = machine.cgroup(
        "cg", cgroup_controllers="memory\n", cgroup_subtree_control="", cgroup_procs="1\n4242\n"
    )
    assert machine.probe().memory is None
    assert not (base / "croniq-agent").exists()


def test_the_hybrid_limits_memory_in_v1_and_counts_cpu_in_v2(machine):
    machine.mount(
        [
            ("/", "memory", "cgroup", ",memory"),
            ("/", "cpuacct", "cgroup", ",cpuacct"),
            ("/", "unified", "cgroup2", ""),
        ],
        "4:memory:/process_api/abc\n2:cpuacct:/\n0::/\n",
    )
    memory = machine.cgroup("memory/process_api/abc")
    unified = machine.cgroup("unified", cgroup_controllers="")
    found = machine.probe()
    assert (found.memory, found.cpu) == (Place(1, str(memory)), Place(2, str(unified)))
    assert found.describe() == (
        f"memory limits: cgroup v1 below {memory}; CPU time: cgroup v2 below {unified}"
    )


def test_v1_alone_limits_memory_and_counts_cpu_in_cpuacct(machine):
    machine.mount(
        [("/", "memory", "cgroup", ",memory"), ("/", "cpu", "cgroup", ",cpu,cpuacct")],
        "4:memory:/agent\n3:cpu,cpuacct:/agent\n",
    )
    memory, cpu = machine.cgroup("memory/agent"), machine.cgroup("cpu/agent")
    found = machine.probe()
    assert (found.memory, found.cpu) == (Place(1, str(memory)), Place(1, str(cpu)))


def test_a_mount_that_does_not_show_the_agents_cgroup_is_not_used(machine):
    machine.mount([("/docker/other", "cg", "cgroup2", "")], "0::/docker/mine\n")
    machine.cgroup("cg")
    assert not machine.probe()
    assert machine.probe().describe() == (
        "memory limits: per process (setrlimit), no cgroup; "
        "CPU time: counted from /proc, per process (setrlimit)"
    )


def test_cgroups_left_by_an_agent_no_longer_running_are_removed(machine):
    machine.mount([("/", "cg", "cgroup2", "")], "0::/agent\n")
    base = machine.cgroup("cg/agent")
    dead = 2**22 + 12345  # above any pid the kernel hands out
    for name in (f"croniq-{dead}-7-abc", f"croniq-{os.getpid()}-8-def", "croniq-agent", "other"):
        (base / name).mkdir()
    machine.probe()
    assert sorted(p.name for p in base.iterdir()) == sorted(
        [f"croniq-{os.getpid()}-8-def", "croniq-agent", "other"]
    )


def test_a_runs_cgroups_hold_its_limit_and_say_what_happened(machine, monkeypatch):
    memory, cpu = machine.cgroup("v1mem"), machine.cgroup("v2")
    made, real_mkdir, real_rmdir = [], os.mkdir, os.rmdir

    def mkdir(path):  # as the kernel makes a cgroup: with its files
        real_mkdir(path)
        made.append(path)
        if path.startswith(str(cpu)):
            with open(os.path.join(path, "cpu.stat"), "w") as stat:
                stat.write("usage_usec 2500000\nuser_usec 1\n")
        else:
            with open(os.path.join(path, "memory.oom_control"), "w") as control:
                control.write("under_oom 0\noom_kill 1\n")

    def rmdir(path):  # as the kernel removes one: its files go with it
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        real_rmdir(path)

    monkeypatch.setattr(cgroups.os, "mkdir", mkdir)
    monkeypatch.setattr(cgroups.os, "rmdir", rmdir)
    found = Cgroups(Place(1, str(memory)), Place(2, str(cpu)))
    run = found.make(7, 64 * 1024 * 1024, count_cpu=True)
    assert run.joined == made
    with open(os.path.join(made[0], "memory.limit_in_bytes")) as limit:
        assert limit.read() == str(64 * 1024 * 1024)
    assert run.cpu_seconds() == 2.5
    assert run.oom_kills() == 1
    run.remove()
    assert not any(os.path.exists(path) for path in made)


def test_a_v2_cgroup_without_the_memory_controller_limits_nothing(machine, monkeypatch):
    base = machine.cgroup("v2")
    found = Cgroups(Place(2, str(base)), None)
    run = found.make(7, 64 * 1024 * 1024, count_cpu=False)
    assert run == RunCgroup()  # no memory.max: the caller falls back to setrlimit
    assert list(base.iterdir()) == []
