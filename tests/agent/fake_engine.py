"""A stand-in for docker's and podman's command lines, for the agent's own
tests (the real engine's are in tests/docker).

`install(directory, names)` writes executables named `docker` (and
`podman`) into `directory/bin` that record each call in
`directory/calls.jsonl` and act it out:

- `version`: exits with FAKE_ENGINE_VERSION_EXIT (0), after
  FAKE_ENGINE_VERSION_SLEEP seconds (0);
- `run ... --name NAME --env-file FILE ... -- IMAGE ARGS...`: reads the env
  file, records it, and runs ARGS with that environment as the
  "container": a process of its own session, its pid in `NAME.pid`,
  exiting as it exits. An image starting with `absent` fails as an engine
  that has no such image does (exit 125). Like docker's with
  `--sig-proxy=false`, it ignores SIGTERM;
- `kill --signal SIG NAME`, `stop -t N NAME`, `rm -f NAME`: signal the
  container's process (rm and stop end it), or say there is no such
  container.
"""

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time

    STATE = {state!r}
    NAME = {name!r}


    def record(**fields):
        with open(os.path.join(STATE, "calls.jsonl"), "a") as calls:
            calls.write(json.dumps({{"engine": NAME, **fields}}) + "\\n")


    def pid_of(container):
        try:
            with open(os.path.join(STATE, container + ".pid")) as handle:
                pid = int(handle.read())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None


    def absent(container):
        sys.stderr.write(f"Error response from daemon: No such container: {{container}}\\n")
        sys.exit(1)


    args = sys.argv[1:]
    verb = args[0]
    if verb == "version":
        record(argv=args)
        time.sleep(float(os.environ.get("FAKE_ENGINE_VERSION_SLEEP", "0")))
        sys.exit(int(os.environ.get("FAKE_ENGINE_VERSION_EXIT", "0")))
    if verb == "run":
        split = args.index("--")
        options, image, command = args[:split], args[split + 1], args[split + 2 :]
        container = options[options.index("--name") + 1]
        with open(options[options.index("--env-file") + 1]) as handle:
            env_file = handle.read()
        record(argv=args, env_file=env_file)
        if image.startswith("absent"):
            sys.stderr.write(
                f"{{NAME}}: Error response from daemon: No such image: {{image}}\\n\\n"
                f"Run '{{NAME}} run --help' for more information\\n"
            )
            sys.exit(125)
        env = dict(line.split("=", 1) for line in env_file.splitlines())
        env["PATH"] = os.environ["PATH"]
        child = subprocess.Popen(command, env=env, start_new_session=True)
        # After the start: the container must not inherit it.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open(os.path.join(STATE, container + ".pid"), "w") as handle:
            handle.write(str(child.pid))
        code = child.wait()
        sys.exit(code if code >= 0 else 128 - code)
    container = args[-1]
    record(argv=args)
    pid = pid_of(container)
    if verb == "kill":
        if pid is None:
            absent(container)
        os.kill(pid, getattr(signal, "SIG" + args[args.index("--signal") + 1]))
    elif verb == "stop":
        if pid is None:
            absent(container)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + float(args[args.index("-t") + 1])
        while pid_of(container) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_of(container):
            os.kill(pid, signal.SIGKILL)
    elif verb == "rm":
        if pid is None:
            absent(container)
        os.kill(pid, signal.SIGKILL)
    """
)


def install(directory: Path, names=("docker",)) -> Path:
    """The fake engines `names` in `directory`/bin; returns that bin."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = bin_dir / name
        code = SCRIPT.format(state=str(directory), name=name)
        path.write_text(f"#!{sys.executable}\n{code}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def calls(directory: Path) -> list[dict]:
    """The engine calls recorded so far, in order."""
    path = directory / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def verbs(directory: Path) -> list[str]:
    """Each call as its words after the engine's name, joined."""
    return [" ".join(call["argv"]) for call in calls(directory)]


def container_pid(directory: Path, name: str) -> int | None:
    path = directory / f"{name}.pid"
    return int(path.read_text()) if path.exists() else None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())
