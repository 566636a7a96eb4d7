"""Dispatch benchmarks: real uvicorn, real scheduler_loop, runners over HTTP.

Prints one JSON line per figure (issue "Runner API", section "Speed"):

- steady: 50 jobs `@every 1s`, 20 runners in long-poll; dispatch latency
  (scheduled_for -> the poll answer arrives at the runner) p50/p99.
- burst: 1,000 executions due at once, 100 waiting runners; time until the
  last one is in a runner's hands.
- throughput: claim + finish over HTTP, executions per second.
- group_throughput: the same with every job in one concurrency group of
  budget 10, against no group, in the same run (target: within 2x).
- idle: 1,000 long-polls held by one uvicorn worker: its RSS and the
  database connections open meanwhile (pg_stat_activity on PostgreSQL).

    .venv/bin/python bench/dispatch_latency.py            # SQLite, a temporary file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_dispatch_bench \
        .venv/bin/python bench/dispatch_latency.py        # a fresh database, dropped after

Options: --only steady,burst,throughput,group_throughput,idle  --seconds N (steady duration)
         --jobs N (steady: jobs @every 1s, default 50).
"""

import argparse
import asyncio
import atexit
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STEADY_JOBS = 50
STEADY_RUNNERS = 20
BURST_EXECUTIONS = 1000
BURST_RUNNERS = 100
THROUGHPUT_EXECUTIONS = 2000
THROUGHPUT_RUNNERS = 16
IDLE_POLLS = 1000


def emit(**fields):
    print(json.dumps(fields), flush=True)


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))
    return ordered[index]


def ms(seconds):
    return None if seconds is None else round(seconds * 1000, 2)


# -- database and processes ------------------------------------------------


def prepare_database():
    url = os.environ.get("DATABASE_URL")
    if not url:
        url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'dispatch-bench.sqlite3'}"
    elif url.startswith("postgres"):
        server, name = url.rsplit("/", 1)
        url = f"{server}/{name}_{uuid.uuid4().hex[:6]}"
        import psycopg

        with psycopg.connect(server + "/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{url.rsplit("/", 1)[1]}"')
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("SECRET_KEY", "croniq-bench-key")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return url


def drop_database(url):
    if url.startswith("postgres"):
        from django.db import connections

        connections.close_all()
        from harness.processes import drop_database as drop

        drop(url)


def backend(url):
    return "postgresql" if url.startswith("postgres") else "sqlite"


def start_web(url, workdir):
    return start_webs(url, workdir, 1)[0]


def start_webs(url, workdir, count, **env):
    """`count` uvicorn processes, each on its own port, all ready. They
    start side by side: each takes a second or two of CPU to import Django."""
    from harness.processes import Server

    servers = [Server(url, workdir / f"web-{n}.log", **env) for n in range(count)]
    atexit.register(stop_webs, servers)  # a scenario that fails leaves none running
    return [server.wait_ready() for server in servers]


def stop_webs(webs):
    for web in webs:
        web.stop()


def spread_runners(webs, secret, count, capacity):
    """`count` runners dealt round the web processes: runner n speaks only
    to process n mod len(webs), as if a round-robin balancer sat between."""
    return [Runner(webs[n % len(webs)].url, secret, capacity) for n in range(count)]


def by_process(webs, urls):
    """How many of `urls` (one per delivered execution) each process served."""
    return [sum(1 for u in urls if u == web.url) for web in webs]


def start_loop(url, workdir, **env):
    from harness.processes import start_loop as start

    loop = start(url, workdir / "loop.log", **env)
    atexit.register(loop.stop)
    return loop


def new_token():
    from runners.models import RunnerToken

    return RunnerToken.issue(f"bench-{uuid.uuid4().hex[:8]}")[1]


def notify():
    from dispatch.notify import notify_new_work

    notify_new_work()


def insert_pending(count, job_prefix, group=None):
    """`count` executions due now, committed in one transaction; returns the
    commit time. With `group` (a ConcurrencyGroup), their jobs share it."""
    from django.db import transaction
    from django.utils import timezone

    from scheduler.models import Execution, Job

    now = timezone.now()
    with transaction.atomic():
        jobs = Job.objects.bulk_create(
            Job(
                name=f"{job_prefix}-{n}",
                schedule="@every 1h",
                command="true",
                enabled=False,
                concurrency_group=group,
            )
            for n in range(count)
        )
        Execution.objects.bulk_create(
            Execution(job=job, scheduled_for=now, run_after=now, created_at=now) for job in jobs
        )
    committed = time.time()
    notify()
    return committed


# -- a runner over HTTP ----------------------------------------------------


class Runner:
    def __init__(self, url, secret, capacity, labels=()):
        self.url = url
        self.secret = secret
        self.http = self.new_http()
        self.session = uuid.uuid4().hex
        self.capacity = capacity
        self.held = 0
        self.room = threading.Condition()
        body = {"name": f"bench-{self.session[:10]}", "session": self.session}
        if labels:
            body["labels"] = list(labels)
        answer = self.http.post(url + "/api/v1/runners/register", json=body, timeout=10)
        answer.raise_for_status()
        self.runner_id = answer.json()["runner_id"]

    def new_http(self):
        import requests

        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {self.secret}"
        return http

    def poll(self, wait, capacity=None):
        body = {"session": self.session, "wait": wait, "capacity": capacity or self.capacity}
        answer = self.http.post(
            f"{self.url}/api/v1/runners/{self.runner_id}/poll", json=body, timeout=wait + 30
        )
        answer.raise_for_status()
        return answer.json()["executions"], time.time()

    def finish(self, assignment, http=None):
        body = {"session": self.session, "lease": assignment["lease"], "exit_code": 0}
        answer = (http or self.http).post(
            f"{self.url}/api/v1/executions/{assignment['id']}/finish", json=body, timeout=30
        )
        answer.raise_for_status()


def scheduled_epoch(assignment):
    return datetime.fromisoformat(assignment["scheduled_for"].replace("Z", "+00:00")).timestamp()


# -- scenarios -------------------------------------------------------------


def steady(url, workdir, seconds, jobs=STEADY_JOBS):
    """50 jobs @every 1s through the real loop; 20 runners long-polling."""
    figures = steady_figures(url, workdir, seconds, jobs)
    emit(
        bench="dispatch_latency",
        backend=backend(url),
        jobs=jobs,
        runners=STEADY_RUNNERS,
        **figures,
        load_average=os.getloadavg()[0],
        target="postgresql p50<=10ms p99<=50ms; sqlite p99<=150ms",
        met=steady_met(url, figures["p50_ms"], figures["p99_ms"]),
    )


def steady_figures(
    url, workdir, seconds, jobs=STEADY_JOBS, processes=1, runners=STEADY_RUNNERS, env=None
):
    """Run the steady scenario with `runners` runners spread over
    `processes` web processes, which with the loop run on `url` and `env`;
    returns its figures (milliseconds)."""
    from django.utils import timezone

    from scheduler.models import Execution, Job

    env = env or {}
    webs = start_webs(url, workdir, processes, **env)
    start_at = timezone.now().replace(microsecond=0) + timedelta(seconds=3)
    prefix = f"steady-{uuid.uuid4().hex[:6]}"
    Job.objects.bulk_create(
        Job(name=f"{prefix}-{n}", schedule="@every 1s", command="true", next_run_at=start_at)
        for n in range(jobs)
    )
    loop = start_loop(url, workdir, **env)
    secret = new_token()
    latencies = []
    after_parsing = []  # the same, once this Python client has parsed the answer
    stop = threading.Event()
    warmup_until = start_at.timestamp() + 2

    arrivals = {}
    served_by = []  # the web process (URL) that answered each sample
    # Like the agent: runs finish on their own threads while the runner polls
    # again for its free slots.
    finisher = ThreadPoolExecutor(runners * 2)
    failed_finishes = []
    sessions = threading.local()

    def finisher_client(url):
        """This finisher thread's keep-alive connection to `url`."""
        if not hasattr(sessions, "clients"):
            sessions.clients = {}
        if url not in sessions.clients:
            sessions.clients[url] = LeanClient(url, secret)
        return sessions.clients[url]

    def finish_later(runner, assignment):
        def finish():
            body = {"session": runner.session, "lease": assignment["lease"], "exit_code": 0}
            path = f"/api/v1/executions/{assignment['id']}/finish"
            try:
                finisher_client(runner.url).post(path, body)
            except Exception as error:  # noqa: BLE001 - counted in the figures
                failed_finishes.append(f"{path}: {error!r}")
            finally:
                # Its slot is free either way: a slot kept by a failed
                # finish would starve the runner for the rest of the run.
                with runner.room:
                    runner.held -= 1
                    runner.room.notify()

        finisher.submit(finish)

    def run(runner):
        client = LeanClient(runner.url, secret)
        while not stop.is_set():
            with runner.room:
                while runner.held >= runner.capacity and not stop.is_set():
                    runner.room.wait(0.5)
                free = runner.capacity - runner.held
            body = {"session": runner.session, "wait": 5, "capacity": free}
            # `slots`, as the agent sends: a run that ends while the poll
            # waits frees a slot the server may fill.
            if os.environ.get("BENCH_POLL_SLOTS", "1") == "1":
                body["slots"] = runner.capacity
            try:
                found, arrived = client.post_timed(f"/api/v1/runners/{runner.runner_id}/poll", body)
            except OSError:
                if stop.is_set():
                    return  # a busy machine: the web stopped while this poll waited
                raise
            found = found["executions"]
            parsed = time.time()
            with runner.room:
                runner.held += len(found)
            for assignment in found:
                if scheduled_epoch(assignment) >= warmup_until:
                    latencies.append(arrived - scheduled_epoch(assignment))
                    after_parsing.append(parsed - scheduled_epoch(assignment))
                    arrivals[assignment["id"]] = arrived
                    served_by.append(runner.url)
                finish_later(runner, assignment)

    pollers = spread_runners(webs, secret, runners, capacity=5)
    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in pollers]
    for thread in threads:
        thread.start()
    time.sleep(max(0, warmup_until - time.time()) + seconds)
    stop.set()
    Job.objects.update(enabled=False)
    for thread in threads:
        thread.join(10)
    finisher.shutdown(wait=True)
    loop.stop()
    stop_webs(webs)
    # What the loop created ahead for the next instant would go to the
    # runners of a later scenario.
    Execution.objects.filter(job__name__startswith=prefix, state=Execution.PENDING).delete()
    created, claimed = stages(arrivals)
    return dict(
        samples=len(latencies),
        p50_ms=ms(percentile(latencies, 50)),
        p90_ms=ms(percentile(latencies, 90)),
        p99_ms=ms(percentile(latencies, 99)),
        max_ms=ms(max(latencies) if latencies else None),
        parsed_p50_p99_ms=[ms(percentile(after_parsing, 50)), ms(percentile(after_parsing, 99))],
        # Where the time goes, p50/p99, from the scheduled instant (negative:
        # before it): the loop creating the execution (jobs that are not
        # singletons are fired ahead), the web claiming it (the hub claims
        # ahead too, and answers at the instant).
        created_ms=[ms(percentile(created, 50)), ms(percentile(created, 99))],
        claimed_ms=[ms(percentile(claimed, 50)), ms(percentile(claimed, 99))],
        delivered_by_process=by_process(webs, served_by),
        failed_finishes=len(failed_finishes),
    )


def steady_met(url, p50_ms, p99_ms):
    if p50_ms is None:
        return False
    if backend(url) == "postgresql":
        return p50_ms <= 10 and p99_ms <= 50
    return p99_ms <= 150


def stages(arrivals):
    """(created, claimed): each execution's creation and claim, in seconds
    after its scheduled instant. A claim made ahead of the instant records
    the instant as `claimed_at`; its lease, from the claim, tells when it
    was made."""
    from django.conf import settings

    from scheduler.models import Execution

    ttl = timedelta(seconds=settings.CRONIQ_LEASE_TTL)
    created, claimed = [], []
    for scheduled, created_at, lease_expires_at in Execution.objects.filter(
        pk__in=list(arrivals)
    ).values_list("scheduled_for", "created_at", "lease_expires_at"):
        created.append((created_at - scheduled).total_seconds())
        claimed.append((lease_expires_at - ttl - scheduled).total_seconds())
    return created, claimed


def burst(url, workdir):
    """1,000 executions due in the same instant, 100 runners waiting."""
    figures = burst_figures(url, workdir)
    emit(
        bench="dispatch_burst",
        backend=backend(url),
        executions=BURST_EXECUTIONS,
        runners=BURST_RUNNERS,
        **figures,
        load_average=os.getloadavg()[0],
        target="postgresql last<=1000ms; sqlite last<=3000ms",
        met=burst_met(figures, 1000 if backend(url) == "postgresql" else 3000),
    )


def burst_met(figures, last_ms):
    return figures["delivered"] == BURST_EXECUTIONS and figures["last_ms"] <= last_ms


def burst_figures(url, workdir, processes=1):
    """Run the burst with the runners spread over `processes` web processes;
    returns its figures (milliseconds from the commit)."""
    webs = start_webs(url, workdir, processes)
    secret = new_token()
    runners = spread_runners(webs, secret, BURST_RUNNERS, capacity=10)
    arrivals = []
    served_by = []
    lock = threading.Lock()

    def run(runner):
        held = 0
        while held < runner.capacity:
            wait = 2 if held else 10
            found, arrived = runner.poll(wait=wait, capacity=runner.capacity - held)
            if not found:
                return
            held += len(found)
            with lock:
                arrivals.extend(arrived for _ in found)
                served_by.extend(runner.url for _ in found)

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in runners]
    for thread in threads:
        thread.start()
    time.sleep(2)  # every runner is waiting
    committed = insert_pending(BURST_EXECUTIONS, f"burst-{uuid.uuid4().hex[:6]}")
    for thread in threads:
        thread.join(30)
    stop_webs(webs)
    return dict(
        delivered=len(arrivals),
        p50_ms=ms(statistics.median(arrivals) - committed if arrivals else None),
        last_ms=ms(max(arrivals) - committed if arrivals else None),
        delivered_by_process=by_process(webs, served_by),
    )


class LeanClient:
    """Keep-alive JSON over http.client: the load generator should cost the
    machine as little as possible (requests spends about as much CPU per call
    as the server does), so the figure is the server's."""

    def __init__(self, url, secret):
        import http.client
        from urllib.parse import urlsplit

        self.connection = http.client.HTTPConnection(urlsplit(url).netloc, timeout=60)
        self.headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def post(self, path, body):
        return self.post_timed(path, body)[0]

    def post_timed(self, path, body):
        """(answer, when its first bytes could be read): the arrival instant
        is taken before parsing, which in this one load-generating process
        queues behind the other runners' threads for the interpreter."""
        import http.client

        try:
            answer, arrived = self.send(path, body)
        except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
            # The server closed this keep-alive connection while it was idle
            # (uvicorn does after 5 s): the request never reached it, so it
            # goes again on a new one. A finisher thread's connection to one
            # of several web processes idles that long.
            self.connection.close()
            answer, arrived = self.send(path, body)
        data = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"{path}: {answer.status} {data[:200]!r}")
        return json.loads(data), arrived

    def send(self, path, body):
        import select

        self.connection.request("POST", path, json.dumps(body), self.headers)
        # poll, not select: a process with many runners has sockets past
        # select's limit of 1,024 descriptors.
        readable = select.poll()
        readable.register(self.connection.sock, select.POLLIN)
        readable.poll()
        arrived = time.time()
        return self.connection.getresponse(), arrived


def throughput(url, workdir):
    """Claim + finish over HTTP as fast as THROUGHPUT_RUNNERS runners can go:
    the runs of a poll reported together (the agent), then each on its own
    (an older agent)."""
    for together in (True, False):
        figures = throughput_figures(url, workdir, together=together)
        emit(
            bench="claim_finish_throughput",
            backend=backend(url),
            runners=THROUGHPUT_RUNNERS,
            **figures,
            load_average=os.getloadavg()[0],
            target="postgresql >= 500/s",
            # The target is PostgreSQL's, with the agent's reports; SQLite's
            # figure and an older agent's are for comparison.
            met=figures["per_second"] >= 500 if backend(url) == "postgresql" and together else None,
        )


def throughput_figures(url, workdir, group=None, capacity=10, processes=1, together=True):
    """Claim + finish with the runners spread over `processes` web
    processes; with `group`, every job in that concurrency group.

    `together`: the runs a poll brought are reported in one call (`POST
    /runners/{id}/finish`), as the agent reports runs that end together;
    otherwise each with its own finish, as an older agent does."""
    webs = start_webs(url, workdir, processes)
    secret = new_token()
    runners = spread_runners(webs, secret, THROUGHPUT_RUNNERS, capacity)
    prefix = f"throughput-{uuid.uuid4().hex[:6]}"
    insert_pending(THROUGHPUT_EXECUTIONS, prefix, group)
    done = []

    def run(runner):
        client = LeanClient(runner.url, secret)
        poll = {"session": runner.session, "wait": 0, "capacity": runner.capacity}
        waiting = {**poll, "wait": 1}
        while sum(done) < THROUGHPUT_EXECUTIONS:
            found = client.post(f"/api/v1/runners/{runner.runner_id}/poll", poll)["executions"]
            if not found and group is not None:
                # The group is full while others run its work: wait for room.
                found = client.post(f"/api/v1/runners/{runner.runner_id}/poll", waiting)
                found = found["executions"]
            if not found:
                if group is None:
                    return
                continue
            if together:
                reports = [{"id": a["id"], "lease": a["lease"], "exit_code": 0} for a in found]
                finish = {"session": runner.session, "executions": reports}
                client.post(f"/api/v1/runners/{runner.runner_id}/finish", finish)
            else:
                for assignment in found:
                    lease = assignment["lease"]
                    finish = {"session": runner.session, "lease": lease, "exit_code": 0}
                    client.post(f"/api/v1/executions/{assignment['id']}/finish", finish)
            done.append(len(found))

    def web_cpu():
        return sum(cpu_seconds(web.popen.pid) for web in webs)

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in runners]
    started = time.perf_counter()
    cpu_before = web_cpu()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    elapsed = time.perf_counter() - started
    cpu = web_cpu() - cpu_before
    stop_webs(webs)
    return dict(
        finish="together" if together else "each",
        executions=sum(done),
        seconds=round(elapsed, 2),
        per_second=round(sum(done) / elapsed, 1),
        # Web-process CPU per execution (one poll share + one finish), all
        # processes together: the figure that does not depend on what else
        # the machine is doing.
        web_cpu_ms_per_execution=round(cpu / max(1, sum(done)) * 1000, 2),
    )


def group_throughput(url, workdir):
    """Claim + finish with every job in one concurrency group of budget 10,
    against the same run without a group."""
    from scheduler.models import ConcurrencyGroup

    # One slot per runner: a budget of 10 among 16 runners, each running one
    # job at a time (with 10 slots each, one runner would take the whole
    # budget and finish it alone while the others wait).
    plain = throughput_figures(url, workdir, capacity=1)["per_second"]
    group = ConcurrencyGroup.objects.create(name=f"bench-{uuid.uuid4().hex[:6]}", max_concurrent=10)
    grouped = throughput_figures(url, workdir, group=group, capacity=1)["per_second"]
    emit(
        bench="claim_finish_throughput_in_a_group",
        backend=backend(url),
        executions=THROUGHPUT_EXECUTIONS,
        runners=THROUGHPUT_RUNNERS,
        runner_capacity=1,
        group_budget=group.max_concurrent,
        no_group_per_second=round(plain, 1),
        group_per_second=round(grouped, 1),
        ratio=round(plain / grouped, 2),
        load_average=os.getloadavg()[0],
        target="no group / group <= 2",
        met=plain / grouped <= 2,
    )


async def hold_polls(port, secret, runner_id, session, count, wait):
    """Open `count` long-polls on raw sockets (no thread each); returns the writers."""
    body = json.dumps({"session": session, "wait": wait, "capacity": 1}).encode()
    request = (
        f"POST /api/v1/runners/{runner_id}/poll HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {secret}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    streams = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(request)
        streams.append((reader, writer))
    await asyncio.gather(*(w.drain() for _, w in streams))
    return streams


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def cpu_seconds(pid):
    """User + system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid):
    """Pids of the processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry))
    return found


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def database_connections(url):
    if not url.startswith("postgres"):
        return None
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
        return conn.execute(query, [name]).fetchone()[0]


def idle(url, workdir):
    """1,000 long-polls waiting in one uvicorn worker."""
    from django.db import connections

    web = start_web(url, workdir)
    secret = new_token()
    runner = Runner(web.url, secret, capacity=1)
    connections.close_all()
    baseline = rss_mb(web.popen.pid)

    async def scenario():
        streams = await hold_polls(
            web.port, secret, runner.runner_id, runner.session, IDLE_POLLS, wait=30
        )
        await asyncio.sleep(8)  # all of them are past their claim and waiting
        figures = dict(
            rss_mb=rss_mb(web.popen.pid),
            threads=threads_of(web.popen.pid),
            db_connections=database_connections(url),
        )
        started = time.perf_counter()
        await asyncio.to_thread(__import__("requests").get, web.url + "/healthz", timeout=5)
        figures["healthz_ms"] = ms(time.perf_counter() - started)
        for _, writer in streams:
            writer.close()
        return figures

    figures = asyncio.run(scenario())
    web.stop()
    emit(
        bench="idle_long_polls",
        backend=backend(url),
        polls=IDLE_POLLS,
        baseline_rss_mb=baseline,
        **figures,
        target="rss<=250MB, no connection per waiting poll",
        met=figures["rss_mb"] <= 250
        and (figures["db_connections"] is None or figures["db_connections"] < IDLE_POLLS // 10),
    )


SCENARIOS = {
    "steady": steady,
    "burst": burst,
    "throughput": throughput,
    "group_throughput": group_throughput,
    "idle": idle,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--jobs", type=int, default=STEADY_JOBS, help="steady: jobs @every 1s")
    args = parser.parse_args()
    url = prepare_database()
    workdir = Path(tempfile.mkdtemp(prefix="croniq-dispatch-bench-"))
    try:
        for name in args.only.split(","):
            if name == "steady":
                steady(url, workdir, args.seconds, args.jobs)
            else:
                SCENARIOS[name](url, workdir)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
