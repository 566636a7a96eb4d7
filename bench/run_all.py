"""Run every benchmark in bench/ and collect its JSON lines.

    .venv/bin/python bench/run_all.py                  # SQLite only
    CRONIQ_BENCH_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres \
        .venv/bin/python bench/run_all.py              # SQLite, then PostgreSQL

Each bench/*.py (except this file) runs in its own process, once per backend:
on SQLite with DATABASE_URL unset (each script makes its own temporary file),
on PostgreSQL with DATABASE_URL pointing at a database named after the script
on the server given by CRONIQ_BENCH_POSTGRES_URL (or a postgres:// DATABASE_URL).
Scripts that need no database (next_fire.py) run once.

Writes bench/results.json (every line, the machine, exit codes and run times)
and bench/results.md (one table row per figure). Exits 1 when a script failed
to run (a missed target is reported, not an error).

Options: --only dispatch,tick  --backends sqlite,postgres  --timeout SECONDS
         --merge (re-run some scripts, keep the others' results)

The longest script is top_of_band.py on PostgreSQL: 10 minutes measured after
about 2 of set-up and warm-up, within the default timeout of 30 minutes a
script (on SQLite it only says that it needs PostgreSQL).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS_JSON = BENCH / "results.json"
RESULTS_MD = BENCH / "results.md"
# Scripts that never touch a database: one run covers both backends.
NO_DATABASE = {"next_fire", "forecast_every_second", "annotations"}
# Fields that name a figure rather than measure it.
NAME_FIELDS = ("bench", "name", "scenario", "page", "step", "case", "backend", "finish")
VERDICT_FIELDS = ("met", "target", "target_ms", "unit")


def scripts(only=None):
    found = sorted(p for p in BENCH.glob("*.py") if p.name != Path(__file__).name)
    if only:
        found = [p for p in found if p.stem in only]
    return found


def postgres_server():
    """The PostgreSQL server URL (without a database name), or None."""
    url = os.environ.get("CRONIQ_BENCH_POSTGRES_URL") or os.environ.get("DATABASE_URL", "")
    if not url.startswith("postgres"):
        return None
    return url.rsplit("/", 1)[0]


def machine():
    info = {"python": platform.python_version(), "platform": platform.platform()}
    info["cpus"] = os.cpu_count()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu_model"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
        info["load_average_at_start"] = list(os.getloadavg())
    except OSError:
        pass
    info["python_loop_seconds"] = python_loop_seconds()
    return info


def python_loop_seconds(n=5_000_000):
    """How long one core takes for a fixed pure-Python loop (best of three).

    Machines of one kind differ from day to day (shared hosts): the figures
    of two reports compare only as far as this one does.
    """
    best = None
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        took = time.perf_counter() - started
        best = took if best is None else min(best, took)
    return round(best, 3)


def run_script(path, backend, server, timeout):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONUNBUFFERED"] = "1"
    if backend == "postgresql":
        env["DATABASE_URL"] = f"{server}/croniq_bench_{path.stem}"
    started = time.monotonic()
    print(f"=== {path.name} on {backend}", flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(path)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as expired:
        returncode = None
        stdout = (expired.stdout or b"").decode(errors="replace")
        stderr = f"timed out after {timeout}s\n" + (expired.stderr or b"").decode(errors="replace")
    lines = parse_lines(stdout)
    for line in lines:
        print("   ", json.dumps(line), flush=True)
    seconds = round(time.monotonic() - started, 1)
    run = {
        "script": path.name,
        "backend": backend,
        "exit_code": returncode,
        "seconds": seconds,
        "results": lines,
        "stderr_tail": stderr[-2000:] if returncode != 0 else "",
    }
    if failed(run):
        print(f"    exit {returncode}; stderr tail:\n{stderr[-2000:]}", flush=True)
    return run


def parse_lines(stdout):
    """The JSON objects a script printed (other lines are ignored)."""
    found = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def failed(run):
    """Crashed, printed nothing, or died half-way (a script may exit 1 for a
    missed target, but not with a traceback)."""
    return (
        run["exit_code"] not in (0, 1)
        or not run["results"]
        or "Traceback" in run.get("stderr_tail", "")
    )


def describe(line):
    """(what, figures, verdict) for one JSON line of any script."""
    what = " ".join(str(line[k]) for k in NAME_FIELDS if k in line and k != "backend")
    figures = ", ".join(
        f"{k}={format_value(v)}" + (f" {line['unit']}" if k == "value" and "unit" in line else "")
        for k, v in line.items()
        if k not in NAME_FIELDS and k not in VERDICT_FIELDS and not isinstance(v, dict | list)
    )
    target = line.get("target", line.get("target_ms"))
    unit = line.get("unit", "ms" if "target_ms" in line else "")
    verdict = "—"
    if line.get("met") is not None:  # None: a figure measured for comparison only
        verdict = "met" if line["met"] else "**missed**"
    if target is not None:
        verdict += f" (target {format_value(target)} {unit})".rstrip()
    return what or "-", figures or "-", verdict


def format_value(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def markdown(report):
    m = report["machine"]
    load = ", ".join(f"{x:.1f}" for x in m.get("load_average_at_start", []))
    out = [
        "# Benchmark results",
        "",
        f"Measured {report['started_at']} on {m.get('cpu_model', '?')}, {m.get('cpus')} CPUs, "
        f"{m.get('memory_gib', '?')} GiB, Python {m.get('python')} "
        f"(load average at start: {load}; the load column is the 1-minute load average "
        "when each script started: 2 means both cores were already busy). "
        f"CPU speed: a fixed Python loop of 5 million additions took "
        f"{m.get('python_loop_seconds', '?')} s (bench/run_all.py `python_loop_seconds`; "
        "compare reports only as far as this figure agrees).",
        "Produced by `make bench` (bench/run_all.py); every line is in bench/results.json. "
        "docs/performance.md explains the figures.",
        "",
        "| script | backend | load | figure | values | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in report["runs"]:
        loads = run.get("machine", m).get("load_average_at_start")
        load = f"{loads[0]:.1f}" if loads else "?"
        where = f"{run['script']} | {run['backend']} | {load}"
        if failed(run):
            out.append(
                f"| {where} | **did not run** (exit {run['exit_code']}) | see results.json | — |"
            )
            continue
        for line in run["results"]:
            what, figures, verdict = describe(line)
            out.append(f"| {where} | {what} | {figures} | {verdict} |")
    out.append("")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated script names without .py")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other scripts' runs from the existing bench/results.json",
    )
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    wanted = set(args.backends.replace("postgres,", "postgresql,").split(","))
    server = postgres_server()
    backends = ["sqlite"] + (["postgresql"] if server else [])
    backends = [b for b in backends if b in wanted or (b == "postgresql" and "postgres" in wanted)]
    if not server:
        print("CRONIQ_BENCH_POSTGRES_URL not set: SQLite only", flush=True)

    report = {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "runs": [],
    }
    kept = []
    if args.merge and RESULTS_JSON.exists():
        chosen = {p.name for p in scripts(only)}
        # A script re-run on some backends keeps its runs on the others.
        kept = [
            r
            for r in json.loads(RESULTS_JSON.read_text())["runs"]
            if r["script"] not in chosen or r["backend"] not in backends + ["none"]
        ]
    for path in scripts(only):
        for backend in backends if path.stem not in NO_DATABASE else ["none"]:
            before = machine()  # the load differs from script to script
            run = run_script(path, backend, server, args.timeout)
            run["machine"] = before
            report["runs"].append(run)
            # Written after every script, so a long run can be read while it goes on.
            RESULTS_JSON.write_text(json.dumps(report, indent=1) + "\n")
            RESULTS_MD.write_text(markdown(report))
    report["runs"] = sorted(kept + report["runs"], key=lambda r: (r["script"], r["backend"]))
    report["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS_JSON.write_text(json.dumps(report, indent=1) + "\n")
    RESULTS_MD.write_text(markdown(report))
    broken = [f"{r['script']} ({r['backend']})" for r in report["runs"] if failed(r)]
    print(f"wrote {RESULTS_JSON.relative_to(ROOT)} and {RESULTS_MD.relative_to(ROOT)}")
    if broken:
        print("did not run: " + ", ".join(broken))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
