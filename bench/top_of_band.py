"""The top of the band: 10,000 jobs, 500 runners, 2 loops, 2 web processes.

Croniq's whole shape at the top of its band (issue "Fast for every job"),
on PostgreSQL: two real uvicorn web processes and two real scheduler_loop
processes on one database holding 10,000 jobs (70% hourly or daily, 25%
every few minutes, 5% every few seconds; a quarter on calendars, one of
which blocks the present), and 500 simulated runners with mixed labels and
2 to 8 slots (more in all than the busiest instant has runs) in this one
process: a thread each, long-polling (`early`, as the agent does) one of
the two web processes over a keep-alive connection, and finishing each run
(exit 0) a short random time after its instant, reported as the agent
reports: one call at a time per runner, the runs that ended while one was
on its way together in the next, a lone run's as the single finish.

After a warm-up, for `--minutes` (default 10), it prints JSON lines:

- firing_lag: scheduled_for -> the execution row's created_at, p50/p99
  (negative: the loop fires ahead of the instant);
- dispatch: scheduled_for -> the assignment read by a runner, p50/p99
  (negative: an early poll's answer arrives before the instant);
- db_connections: pg_stat_activity for the bench database, sampled, held
  by each process (matched through the client's port);
- rss: each web and loop process, the highest sample;
- postgres_cpu: the CPU of the database's backends over the run / wall time;
- summary: executions, load average, setup time and every target met;
  with the server's autovacuum off, the bench's own VACUUM passes
  (VACUUM_EVERY).

Targets: firing lag p99 <= 50 ms, dispatch p99 <= 100 ms, web RSS <= 300 MB
per process, database connections a small constant per process.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_top_bench \
        .venv/bin/python bench/top_of_band.py --minutes 2   # a fresh database, dropped after

On SQLite it prints one line saying it needs PostgreSQL and exits 0.
Options: --minutes N  --jobs N  --runners N  --warm-up SECONDS  --capacities 2,4,6,8
"""

import argparse
import collections
import contextlib
import heapq
import http.client
import io
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The dispatch latency bench's set-up, runner and measures (bench/ is on sys.path).
from dispatch_latency import (  # noqa: E402
    LeanClient,
    Runner,
    children,
    cpu_seconds,
    drop_database,
    emit,
    ms,
    percentile,
    prepare_database,
    rss_mb,
    scheduled_epoch,
    stages,
)

JOBS = 10_000
RUNNERS = 500
# Each runner's slots, drawn from these: 2,500 in all for 500 runners, more
# than the busiest instant (the top of an hour: about 2,100 runs). With
# 1, 2, 2 or 4 (1,170 slots) that instant's runs waited seconds for slots to
# free, which no dispatch path can shorten (`--capacities 1,2,2,4`).
CAPACITIES = (2, 4, 6, 8)
WEBS = 2
LOOPS = 2
WARM_UP = 30.0
# Jobs start firing this long after the runners are polling.
LEAD_IN = 10.0
# A PostgreSQL with autovacuum off (a CI machine's setting) never cleans the
# executions, jobs and runners the run updates thousands of times a minute:
# the claims' index scans then read more dead entries every minute (4,500
# per claim after 5 minutes), which is not what an installation sees.
# There the bench vacuums the database itself, about as often as autovacuum
# would (its default naptime), and says so.
VACUUM_EVERY = 60.0
SAMPLE_EVERY = 2.0
POLL_WAIT = 20
FINISHERS = 8
# A run takes this long (seconds), at random: some of a runner's overlap.
RUN_SECONDS = (0.05, 2.0)
TARGET_FIRING_P99_MS = 50
TARGET_DISPATCH_P99_MS = 100
TARGET_WEB_RSS_MB = 300
# A web process keeps 11 database threads and a listener connected
# (runners/db_threads.py, docs/scaling.md), a loop up to 3 with its
# notifier: a constant, whatever the number of runners.
TARGET_CONNECTIONS_PER_PROCESS = 16

CALENDARS = """
calendars:
  - name: de-workdays
    timezone: Europe/Berlin
    weekdays: [mon, tue, wed, thu, fri]
    holidays: {country: DE, subdivision: BY}
  - name: office-hours
    timezone: Europe/Berlin
    daily_window: {start: "06:00", end: "22:00"}
    base: de-workdays
  - name: christmas-freeze
    timezone: UTC
    exclude:
      - {start: "2026-12-24", end: "2027-01-06", label: Christmas freeze}
  - name: us-nights
    timezone: America/New_York
    daily_window: {start: "20:00", end: "06:00"}
"""
# (labels a runner carries, share of the runners)
RUNNER_LABELS = [
    (["linux"], 40),
    (["linux", "eu"], 20),
    (["linux", "us"], 20),
    (["linux", "gpu"], 10),
    (["windows"], 10),
]
# (labels a job needs, share of the jobs): every set is some runners' subset.
JOB_LABELS = [([], 50), (["linux"], 25), (["linux", "eu"], 10), (["eu"], 5), (["gpu"], 5)]
JOB_LABELS += [(["windows"], 5)]


# -- the jobs --------------------------------------------------------------


def schedule_of(n, rng):
    """(kind, schedule) of job n: 70% hourly or daily, 25% every few
    minutes, 5% every few seconds."""
    share = n % 100
    if share < 70:
        return "hourly_daily", rng.choice(
            [
                f"{n % 60} * * * *",
                "H * * * *",
                "@hourly",
                f"{n % 60} {n % 24} * * *",
                "H H * * *",
                "@daily",
                f"{n % 60} */6 * * *",
            ]
        )
    if share < 95:
        return "minutes", rng.choice(
            ["*/5 * * * *", "H/15 * * * *", "*/2 * * * *", "@every 3m", "@every 10m", "@every 1m"]
        )
    return "seconds", rng.choice(["@every 5s", "@every 10s", "@every 15s", "@every 30s"])


def weighted(choices, rng):
    return rng.choices([c for c, _ in choices], weights=[w for _, w in choices])[0]


def create_calendars(workdir):
    """The calendars, through `apply` and its file format (docs/apply.md)."""
    from django.core.management import call_command

    from calendars.models import Calendar

    path = workdir / "calendars.yaml"
    path.write_text(CALENDARS)
    call_command("apply", str(path), stdout=io.StringIO())
    return list(Calendar.objects.all())


def create_jobs(count, start, calendars, rng):
    """`count` jobs, their first instants at or after `start` (whole
    seconds); `@every` jobs spread over their interval. Returns the kinds'
    counts."""
    from scheduler.jobs.cron import parse_schedule
    from scheduler.models import Job

    shared_rules = {}
    first_instants = {}
    kinds = defaultdict(int)
    jobs = []
    for n in range(count):
        kind, schedule = schedule_of(n, rng)
        on_calendar = n % 4 == 0
        job = Job(
            name=f"top-{n}",
            schedule=schedule,
            command="true",
            labels=weighted(JOB_LABELS, rng),
            calendar=calendars[n % len(calendars)] if on_calendar else None,
            calendar_policy=Job.DEFER if on_calendar and n % 3 == 0 else Job.SKIP,
            singleton=n % 10 == 0,
        )
        job.calendar_rules(shared_rules)  # built once per calendar, kept on the job
        every = parse_schedule(schedule, job.name).every
        after = start - timedelta(microseconds=1)
        if every:
            after += timedelta(seconds=n % int(every.total_seconds())) - every
            job.next_run_at = job.next_fire_after(after)
        else:
            # Jobs of one cron text and calendar share their instant (but
            # for "H", which hashes the job's name).
            key = (schedule, job.calendar_id, job.calendar_policy)
            if "H" in schedule or key not in first_instants:
                first_instants[key] = job.next_fire_after(after)
            job.next_run_at = first_instants[key]
        kinds[kind] += 1
        kinds["on_calendar"] += on_calendar
        jobs.append(job)
    Job.objects.bulk_create(jobs, batch_size=1000)
    return dict(kinds)


# -- the runners -----------------------------------------------------------


class Band:
    """The simulated runners: one thread each, long-polling; runs finish on
    a few shared threads when their random time is up."""

    def __init__(self, web_urls, secret, count, rng, capacities=CAPACITIES):
        self.secret = secret
        self.stop = threading.Event()
        self.arrivals = {}  # execution id -> (scheduled epoch, arrived epoch)
        self.errors = defaultdict(int)
        self.first_errors = {}
        self.due = []  # heap of (finish at, sequence, runner, assignment)
        self.due_lock = threading.Condition()
        self.sequence = 0
        self.finished = 0
        self.local = threading.local()
        self.runners = []
        for n in range(count):
            runner = Runner(
                web_urls[n % len(web_urls)],
                secret,
                capacity=rng.choice(capacities),
                labels=weighted(RUNNER_LABELS, rng),
            )
            runner.http.close()  # registered: its polls go over a LeanClient
            runner.outbox, runner.reporting = [], False  # its runs' ends, as the agent's
            self.runners.append(runner)
        self.rng = rng

    def start(self):
        self.threads = [
            threading.Thread(target=self.poll_loop, args=(r,), daemon=True) for r in self.runners
        ]
        self.threads += [
            threading.Thread(target=self.finish_loop, daemon=True) for _ in range(FINISHERS)
        ]
        for thread in self.threads:
            thread.start()

    def poll_loop(self, runner):
        client = LeanClient(runner.url, self.secret)
        path = f"/api/v1/runners/{runner.runner_id}/poll"
        while not self.stop.is_set():
            with runner.room:
                while runner.held >= runner.capacity and not self.stop.is_set():
                    runner.room.wait(0.5)
                free = runner.capacity - runner.held
            body = {"session": runner.session, "wait": POLL_WAIT, "capacity": free, "early": True}
            body["slots"] = runner.capacity  # as the agent polls
            try:
                try:
                    answer, arrived = client.post_timed(path, body)
                except (OSError, http.client.HTTPException):
                    # The server closes a keep-alive connection idle for 5 s
                    # (a runner busy at its capacity): again on a new one.
                    client = LeanClient(runner.url, self.secret)
                    answer, arrived = client.post_timed(path, body)
            except Exception as error:  # noqa: BLE001 (counted; the web stops at the end)
                if self.stop.is_set():
                    return
                self.failed("poll", error)
                time.sleep(1)
                client = LeanClient(runner.url, self.secret)
                continue
            found = answer["executions"]
            with runner.room:
                runner.held += len(found)
            for assignment in found:
                instant = scheduled_epoch(assignment)
                self.arrivals[assignment["id"]] = (instant, arrived)
                # Like the agent, an early answer's run starts at its instant.
                finish_at = max(arrived, instant) + self.rng.uniform(*RUN_SECONDS)
                with self.due_lock:
                    self.sequence += 1
                    heapq.heappush(self.due, (finish_at, self.sequence, runner, assignment))
                    self.due_lock.notify()

    def finish_loop(self):
        while not self.stop.is_set():
            with self.due_lock:
                while not self.stop.is_set():
                    if self.due and self.due[0][0] <= time.time():
                        _, _, runner, assignment = heapq.heappop(self.due)
                        break
                    wait = self.due[0][0] - time.time() if self.due else 0.5
                    self.due_lock.wait(min(0.5, max(0.001, wait)))
                else:
                    return
            with runner.room:
                runner.outbox.append(assignment)
                if runner.reporting:
                    continue  # goes with the runner's next report
                runner.reporting = True
            self.report(runner)

    def report(self, runner):
        """As the agent reports: one call at a time per runner, the runs that
        ended while one was on its way together in the next."""
        while True:
            with runner.room:
                ended, runner.outbox = runner.outbox, []
                if not ended:
                    runner.reporting = False
                    return
            self.finish(runner, ended)

    def finish(self, runner, ended):
        reports = [{"id": a["id"], "lease": a["lease"], "exit_code": 0} for a in ended]
        body = {"session": runner.session, "executions": reports}
        path = f"/api/v1/runners/{runner.runner_id}/finish"
        if len(ended) == 1:  # a lone report: the single finish, as the agent sends it
            body = {"session": runner.session, "lease": ended[0]["lease"], "exit_code": 0}
            path = f"/api/v1/executions/{ended[0]['id']}/finish"
        try:
            try:
                self.client(runner.url).post(path, body)
            except (OSError, http.client.HTTPException):
                # The server closes a keep-alive connection idle for 5 s:
                # again on a new one, as requests' pool would.
                self.client(runner.url, new=True).post(path, body)
            self.finished += len(ended)
        except Exception as error:  # noqa: BLE001 (counted; the web stops at the end)
            self.failed("finish", error)
        with runner.room:
            runner.held -= len(ended)
            runner.room.notify()

    def failed(self, call, error):
        """Count an error; the first of each kind is kept whole."""
        kind = f"{call} {type(error).__name__}"
        self.errors[kind] += 1
        self.first_errors.setdefault(kind, str(error)[:300])

    def client(self, url, new=False):
        """This finishing thread's connection to `url`."""
        clients = self.local.__dict__.setdefault("clients", {})
        if new or url not in clients:
            clients[url] = LeanClient(url, self.secret)
        return clients[url]

    def shut(self):
        self.stop.set()
        with self.due_lock:
            self.due_lock.notify_all()


# -- sampling the processes and the database -------------------------------


def socket_inodes(pid):
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    except OSError:
        pass
    return inodes


def client_ports(server_port):
    """{socket inode: local port} of the machine's TCP sockets connected to
    `server_port` (one local port may serve sockets to other servers too)."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) == server_port:
                ports[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


class Sampler:
    """Every SAMPLE_EVERY seconds: the database's connections by process,
    the RSS of each process, the CPU of the database's backends and the
    load average."""

    def __init__(self, url, processes):
        import psycopg

        server, self.database = url.rsplit("/", 1)
        self.server_port = urlsplit(server).port or 5432
        self.admin = psycopg.connect(server + "/postgres", autocommit=True)
        self.processes = processes  # {name: pid}; a loop's children are its own
        self.rss = defaultdict(float)
        self.connections = defaultdict(int)  # name -> the most held at once
        self.total_connections = []
        self.backend_cpu = {}  # backend pid -> [cpu at first sight, cpu at last sight]
        self.loads = []
        self.stop = threading.Event()

    def start(self):
        self.started = time.monotonic()
        self.cpu_before = self.process_cpu()
        self.sample()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(SAMPLE_EVERY):
            self.sample()

    def finish(self):
        self.stop.set()
        self.thread.join()
        self.sample()
        self.seconds = time.monotonic() - self.started
        self.cpu_used = {
            name: used - self.cpu_before.get(name, 0.0) for name, used in self.process_cpu().items()
        }
        self.admin.close()

    def process_cpu(self):
        """{name: CPU seconds} of each process with its children (a loop's
        notifier), so far."""
        used = defaultdict(float)
        for name in self.processes:
            for member in self.members(name):
                with contextlib.suppress(OSError):  # ended meanwhile
                    used[name] += cpu_seconds(member)
        return used

    def cpu_percent(self):
        """{name: percent of one core} over the run."""
        return {name: round(100 * used / self.seconds, 1) for name, used in self.cpu_used.items()}

    def sample(self):
        rows = self.admin.execute(
            "SELECT pid, client_port FROM pg_stat_activity WHERE datname = %s", [self.database]
        ).fetchall()
        self.total_connections.append(len(rows))
        first = not self.backend_cpu
        for pid, _ in rows:
            try:
                used = cpu_seconds(pid)
            except OSError:
                continue
            # A backend started during the run counts from zero.
            self.backend_cpu.setdefault(pid, [used if first else 0.0, used])[1] = used
        owners = self.port_owners()
        held = defaultdict(int)
        for _, port in rows:
            held[owners.get(port, "other")] += 1
        for name in [*self.processes, "other"]:
            self.connections[name] = max(self.connections[name], held[name])
        for name, pid in self.processes.items():
            for member in self.members(name):
                try:
                    label = name if member == pid else f"{name} (child)"
                    self.rss[label] = max(self.rss[label], rss_mb(member) or 0)
                except OSError:
                    pass
        self.loads.append(os.getloadavg()[0])

    def members(self, name):
        """The pids of a process: a loop's notifier is a child of its own (the
        webs and loops are children of this process, not of its runners)."""
        pid = self.processes[name]
        return [pid, *children(pid)] if name.startswith("loop") else [pid]

    def port_owners(self):
        """{local port: process name} for the sockets our processes hold."""
        inode_owner = {}
        for name in self.processes:
            for member in self.members(name):
                for inode in socket_inodes(member):
                    inode_owner[inode] = name
        return {
            port: inode_owner[inode]
            for inode, port in client_ports(self.server_port).items()
            if inode in inode_owner
        }

    def postgres_cpu_percent(self):
        used = sum(last - first for first, last in self.backend_cpu.values())
        return round(100 * used / self.seconds, 1)


class Vacuum:
    """Autovacuum's stand-in while the server's is off (VACUUM_EVERY)."""

    def __init__(self, url):
        import psycopg

        self.url = url.replace("postgres://", "postgresql://")
        with psycopg.connect(self.url) as conn:
            self.server_autovacuum = conn.execute("SHOW autovacuum").fetchone()[0]
        self.passes = 0
        self.seconds = 0.0
        self.stop = threading.Event()
        self.thread = None

    def start(self):
        if self.server_autovacuum != "on":
            self.thread = threading.Thread(target=self.run, daemon=True)
            self.thread.start()

    def run(self):
        import psycopg

        while not self.stop.wait(VACUUM_EVERY):
            started = time.monotonic()
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")
            self.passes += 1
            self.seconds += time.monotonic() - started

    def finish(self):
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def summary(self):
        return dict(
            server_autovacuum=self.server_autovacuum,
            bench_vacuum_passes=self.passes,
            bench_vacuum_seconds=round(self.seconds, 1),
        )


def answered_histogram():
    """{bucket bound: count} of the dispatch latency the web processes
    measured as each answer left (`croniq_dispatch_latency_seconds`)."""
    from django.db import connections

    from audit.models import Counter
    from dispatch.latency import LATENCY

    found = defaultdict(int)
    for labels, value in Counter.objects.filter(name=f"{LATENCY}__bucket").values_list(
        "labels", "value"
    ):
        found[labels.removeprefix("le=")] += value
    connections.close_all()
    return found


def bucket_percentile(before, after, q):
    """The bucket bound (ms, or "+Inf") below which q% of the samples taken
    between the two histograms fall."""
    from audit.recording import LATENCY_BUCKETS

    bounds = [str(b) for b in LATENCY_BUCKETS] + ["+Inf"]
    counts = [after.get(b, 0) - before.get(b, 0) for b in bounds]
    total, seen = sum(counts), 0
    for bound, count in zip(bounds, counts, strict=True):
        seen += count
        if total and seen >= q / 100 * total:
            return bound if bound == "+Inf" else round(float(bound) * 1000, 1)
    return None


# -- the run ---------------------------------------------------------------


def run(url, options, workdir):
    from django.db import connections
    from django.utils import timezone

    from harness.processes import Server, start_loop
    from runners.models import RunnerToken
    from scheduler.models import Execution

    rng = random.Random(21)
    setup_started = time.monotonic()
    calendars = create_calendars(workdir)
    secret = RunnerToken.issue(f"bench-{uuid.uuid4().hex[:8]}")[1]
    connections.close_all()
    processes = {}
    started = []
    band = sampler = None
    vacuum = Vacuum(url)
    try:
        webs = [Server(url, workdir / f"web-{n}.log") for n in range(1, WEBS + 1)]
        started += webs
        for n, web in enumerate(webs, 1):
            web.wait_ready(timeout=60)
            processes[f"web-{n}"] = web.popen.pid
        for n in range(1, LOOPS + 1):
            loop = start_loop(url, workdir / f"loop-{n}.log")
            started.append(loop)
            processes[f"loop-{n}"] = loop.popen.pid
        band = Band([w.url for w in webs], secret, options.runners, rng, options.capacities)
        processes["bench (runners)"] = os.getpid()
        band.start()
        vacuum.start()
        begin = timezone.now().replace(microsecond=0) + timedelta(seconds=LEAD_IN + 1)
        kinds = create_jobs(options.jobs, begin, calendars, rng)
        connections.close_all()  # the bench holds no connection while it measures
        setup_seconds = time.monotonic() - setup_started
        late_start = max(0.0, time.time() - begin.timestamp())
        window_start = begin.timestamp() + options.warm_up
        time.sleep(max(0, window_start - time.time()))
        histogram_before = answered_histogram()
        sampler = Sampler(url, processes)
        sampler.start()
        time.sleep(options.minutes * 60)
        window_end = time.time()
        sampler.finish()
        histogram_after = answered_histogram()
    finally:
        vacuum.finish()
        if band:
            band.shut()
        for process in reversed(started):
            process.stop()

    window = (datetime.fromtimestamp(window_start, UTC), datetime.fromtimestamp(window_end, UTC))
    rows = Execution.objects.filter(scheduled_for__gte=window[0], scheduled_for__lt=window[1])
    fired = [(c - s).total_seconds() for s, c in rows.values_list("scheduled_for", "created_at")]
    arrivals = {
        pk: arrived - instant
        for pk, (instant, arrived) in list(band.arrivals.items())
        if window_start <= instant < window_end
    }
    dispatch = list(arrivals.values())
    _, claimed = stages(arrivals)
    steps = execution_steps(arrivals)
    window_arrivals = [
        (instant, arrived, *steps.get(pk, (None, None, None)))
        for pk, (instant, arrived) in list(band.arrivals.items())
        if window_start <= instant < window_end
    ]
    return dict(
        kinds=kinds,
        setup_seconds=setup_seconds,
        late_start=late_start,
        fired=fired,
        dispatch=dispatch,
        window_arrivals=window_arrivals,
        claimed=claimed,
        answered=[bucket_percentile(histogram_before, histogram_after, q) for q in (50, 99)],
        band=band,
        sampler=sampler,
        processes=processes,
        executions=rows.count(),
        undelivered=rows.filter(state=Execution.PENDING).count(),
        vacuum=vacuum.summary(),
    )


def execution_steps(arrivals):
    """{execution id: (created, claimed, the job's schedule and labels)},
    seconds after its instant (as `stages`, per execution)."""
    from django.conf import settings

    from scheduler.models import Execution

    ttl = timedelta(seconds=settings.CRONIQ_LEASE_TTL)
    rows = Execution.objects.filter(pk__in=list(arrivals)).values_list(
        "pk", "scheduled_for", "created_at", "lease_expires_at", "job__schedule", "job__labels"
    )
    return {
        pk: (
            (created - instant).total_seconds(),
            (lease - ttl - instant).total_seconds(),
            f"{schedule} {','.join(labels or []) or '-'}",
        )
        for pk, instant, created, lease, schedule, labels in rows
    }


def instant_figures(band, arrivals, late=0.1):
    """Where the late runs were: the instants with a run that reached its
    runner more than `late` seconds after it, the largest instants, and
    the fleet's slots. An instant with more runs than the fleet has slots
    (the top of the hour, with its hourly jobs) waits for runs to end,
    whatever the scheduler does, and the instants after it queue behind.
    `arrivals`: (instant, arrived, created, claimed, job) of each run."""
    instants, steps, late_jobs = {}, {}, defaultdict(collections.Counter)
    for instant, arrived, created, claimed, job in arrivals:
        instants.setdefault(round(instant), []).append(arrived - instant)
        steps.setdefault(round(instant), []).append((created, claimed))
        if arrived - instant > late:
            late_jobs[round(instant)][job] += 1
    late_instants = {
        at: (len(delays), sum(d > late for d in delays), max(delays))
        for at, delays in instants.items()
        if max(delays) > late
    }
    return dict(
        fleet_slots=sum(runner.capacity for runner in band.runners),
        largest_instants=sorted((len(d) for d in instants.values()), reverse=True)[:5],
        instants=len(instants),
        # [UTC time, runs, runs late, latest ms, last created ms, last
        # claimed ms, the late runs' commonest jobs (schedule and labels)]
        # for each instant with a late run.
        late_instants=[
            [
                datetime.fromtimestamp(at, UTC).strftime("%H:%M:%S"),
                runs,
                late_runs,
                ms(worst),
                ms(max((c for c, _ in steps[at] if c is not None), default=None)),
                ms(max((c for _, c in steps[at] if c is not None), default=None)),
                late_jobs[at].most_common(3),
            ]
            for at, (runs, late_runs, worst) in sorted(late_instants.items())
        ],
    )


def report(options, figures):
    sampler, band = figures["sampler"], figures["band"]
    fired, dispatch = figures["fired"], figures["dispatch"]
    common = dict(bench="top_of_band", backend="postgresql")
    firing_p99 = percentile(fired, 99)
    emit(
        **common,
        name="firing_lag",
        samples=len(fired),
        p50_ms=ms(percentile(fired, 50)),
        p99_ms=ms(firing_p99),
        max_ms=ms(max(fired, default=None)),
        target=f"p99<={TARGET_FIRING_P99_MS}ms",
        met=firing_p99 is not None and firing_p99 * 1000 <= TARGET_FIRING_P99_MS,
    )
    dispatch_p99 = percentile(dispatch, 99)
    emit(
        **common,
        name="dispatch",
        samples=len(dispatch),
        p50_ms=ms(percentile(dispatch, 50)),
        p99_ms=ms(dispatch_p99),
        max_ms=ms(max(dispatch, default=None)),
        late_share=round(sum(d > 0 for d in dispatch) / max(1, len(dispatch)), 4),
        # When the web claimed them (the hub claims ahead of the instant).
        claimed_p50_p99_ms=[
            ms(percentile(figures["claimed"], 50)),
            ms(percentile(figures["claimed"], 99)),
        ],
        # When the answers left the web processes (their histogram, from
        # the instant, an early answer counting 0): the bucket bounds below
        # which p50 and p99 fall. Far below the runners' figures: the time
        # went in this process, or between.
        answered_p50_p99_ms_at_most=figures["answered"],
        **instant_figures(band, figures["window_arrivals"]),
        target=f"p99<={TARGET_DISPATCH_P99_MS}ms",
        met=dispatch_p99 is not None and dispatch_p99 * 1000 <= TARGET_DISPATCH_P99_MS,
    )
    held = dict(sampler.connections)
    per_process = max(v for k, v in held.items() if k != "other")
    emit(
        **common,
        name="db_connections",
        max_total=max(sampler.total_connections),
        mean_total=round(sum(sampler.total_connections) / len(sampler.total_connections), 1),
        max_per_process=per_process,
        by_process=held,
        runners=options.runners,
        target=f"each process <= {TARGET_CONNECTIONS_PER_PROCESS}",
        met=per_process <= TARGET_CONNECTIONS_PER_PROCESS,
    )
    rss = {name: value for name, value in sampler.rss.items() if name != "bench (runners)"}
    web_rss = max(v for k, v in rss.items() if k.startswith("web"))
    emit(
        **common,
        name="rss",
        max_web_rss_mb=web_rss,
        by_process_mb=rss,
        target=f"web <= {TARGET_WEB_RSS_MB}MB",
        met=web_rss <= TARGET_WEB_RSS_MB,
    )
    emit(
        **common,
        name="postgres_cpu",
        backend_cpu_percent_of_one_core=sampler.postgres_cpu_percent(),
        backends_seen=len(sampler.backend_cpu),
        # The other processes, for comparison (percent of one core).
        processes_cpu_percent=sampler.cpu_percent(),
        met=None,
    )
    emit(
        **common,
        name="summary",
        jobs=options.jobs,
        kinds=figures["kinds"],
        runners=options.runners,
        webs=WEBS,
        loops=LOOPS,
        minutes=options.minutes,
        measured_seconds=round(sampler.seconds, 1),
        executions=figures["executions"],
        executions_per_second=round(figures["executions"] / sampler.seconds, 1),
        still_pending_at_end=figures["undelivered"],
        finished_by_runners=band.finished,
        runner_errors=dict(band.errors),
        first_errors=band.first_errors,
        setup_seconds=round(figures["setup_seconds"], 1),
        jobs_inserted_late_s=round(figures["late_start"], 2),
        **figures["vacuum"],
        load_average_before=[round(x, 2) for x in options.load_before],
        load_average_mean_max=[
            round(sum(sampler.loads) / len(sampler.loads), 2),
            round(max(sampler.loads), 2),
        ],
        load_average=os.getloadavg()[0],
        cpus=os.cpu_count(),
        met=None,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--runners", type=int, default=RUNNERS)
    parser.add_argument("--warm-up", type=float, default=WARM_UP)
    parser.add_argument(
        "--capacities",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=CAPACITIES,
        help="each runner's slots, drawn from these (default 2,4,6,8)",
    )
    options = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        emit(
            bench="top_of_band",
            backend="sqlite",
            skipped="needs PostgreSQL (2 loops and 2 web processes on one database)",
            met=None,
        )
        return 0
    options.load_before = os.getloadavg()  # the bench's own threads count in the load too
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-top-bench-"))
    try:
        report(options, run(url, options, workdir))
    finally:
        drop_database(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
