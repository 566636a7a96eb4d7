"""A Croniq cluster of real processes, a ledger-writing workload and seeded faults.

PostgreSQL: a private PostgreSQL server (restarting it disturbs nobody), two
web processes, two scheduler loops and four agents: two talk to a web
process directly, two through a TCP proxy that can cut their network.
SQLite: one web process and one loop (the single-machine deployment), the
same four agents, no database restart.

Every job appends to one ledger file when a run starts, ends, or is
terminated (SIGTERM from the agent). A machine killed with SIGKILL writes
nothing more: the harness notes when it killed it.
"""

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
import yaml

from harness.processes import (
    Process,
    Server,
    manage,
    process_env,
    query,
    start_agent,
    start_loop,
    wait_for,
)
from harness.tcp_proxy import TcpProxy

LEASE_TTL = 4
HEARTBEAT = 1
LOOP_INTERVAL = 0.5
# Long enough that a few seconds of database restart or loop backoff are
# only late, short enough that a real stall shows as a misfire.
MISFIRE_GRACE = 15
INTERVAL = 2  # every job is `@every 2s`
AGENT_CAPACITY = 3

SETTINGS = dict(
    CRONIQ_LEASE_TTL=LEASE_TTL,
    CRONIQ_HEARTBEAT_INTERVAL=HEARTBEAT,
    CRONIQ_MISFIRE_GRACE=MISFIRE_GRACE,
    CRONIQ_TICK_INTERVAL=LOOP_INTERVAL,
    # A runner restarted often during a run is expected to flap; keep the
    # mark (audited) but do not let it hide anything.
    CRONIQ_FLAP_THRESHOLD=3,
    CRONIQ_FLAP_WINDOW=60,
)


@dataclass(frozen=True)
class Profile:
    name: str
    fault_seconds: float
    mean_gap: float  # seconds between faults, on average


PROFILES = {
    "short": Profile("short", fault_seconds=60, mean_gap=3.0),
    "long": Profile("long", fault_seconds=600, mean_gap=3.0),
}


def profile():
    name = os.environ.get("CRONIQ_CHAOS_PROFILE", "short")
    if name not in PROFILES:
        raise ValueError(f"CRONIQ_CHAOS_PROFILE: expected one of {sorted(PROFILES)}, got {name!r}")
    return PROFILES[name]


def seed():
    value = os.environ.get("CRONIQ_CHAOS_SEED")
    return int(value) if value else random.SystemRandom().randrange(1, 2**31)


# -- the workload ------------------------------------------------------------

# (name, singleton, seconds of work). Two singleton jobs outlive the lease
# TTL, so a partitioned runner must fence them while they still run.
JOBS = [
    ("solo-quick", True, 0.3),
    ("solo-medium", True, 1.2),
    ("solo-long", True, 5.0),
    ("solo-longer", True, 9.0),
    ("many-quick", False, 0.2),
    ("many-medium", False, 0.8),
    ("many-long", False, 2.5),
    ("many-longer", False, 5.0),
]
# (name, max_concurrent, seconds of work): overlap queue. Runs longer than
# the interval, so the limit is reached while faults delay and repeat runs.
QUEUE_JOBS = [("queue-pair", 2, 3.0)]
LABEL = "chaos"
# Jobs that outlive a lease: a partitioned runner must fence them.
LONG_JOBS = {name for name, _, seconds in JOBS if seconds > LEASE_TTL}
LONG_SINGLETONS = {name for name, singleton, seconds in JOBS if singleton and seconds > LEASE_TTL}

LEDGER_COMMAND = (
    "L={ledger}; I=$CRONIQ_EXECUTION_ID; "
    'echo "start $I $CRONIQ_JOB $CRONIQ_ATTEMPT $CHAOS_AGENT $(date +%s.%N)" >> $L; '
    "trap 'echo \"killed $I $(date +%s.%N)\" >> $L; exit 143' TERM; "
    'sleep {seconds} & wait $!; echo "end $I $(date +%s.%N)" >> $L'
)


def jobs_file(path, ledger, enabled=True):
    jobs = [
        {
            "name": name,
            "schedule": f"@every {INTERVAL}s",
            "command": LEDGER_COMMAND.format(ledger=ledger, seconds=seconds),
            "labels": [LABEL],
            "singleton": singleton,
            "enabled": enabled,
        }
        for name, singleton, seconds in JOBS
    ] + [
        {
            "name": name,
            "schedule": f"@every {INTERVAL}s",
            "command": LEDGER_COMMAND.format(ledger=ledger, seconds=seconds),
            "labels": [LABEL],
            "overlap": "queue",
            "max_concurrent": limit,
            "enabled": enabled,
        }
        for name, limit, seconds in QUEUE_JOBS
    ]
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


# -- the cluster -------------------------------------------------------------


@dataclass
class Agent:
    name: str
    url: str
    via_proxy: object = None
    process: object = None
    instance: int = 0
    started: list = field(default_factory=list)  # instance labels started
    deaths: dict = field(default_factory=dict)  # instance label -> unix time of SIGKILL

    @property
    def label(self):
        return f"{self.name}#{self.instance}"

    def log_path(self, directory):
        return Path(directory) / f"{self.label.replace('#', '-')}.log"


class Cluster:
    def __init__(self, backend, workdir, postgres=None):
        self.backend = backend
        self.dir = Path(workdir)
        self.postgres = postgres
        self.ledger = self.dir / "ledger"
        self.webs, self.loops, self.agents, self.proxies = [], [], [], []
        self.loop_count = 0
        self.web_starts = 0
        self.operator_saves = 0
        self.token = None
        self.first_instants = {}
        if postgres is not None:
            import psycopg

            with psycopg.connect(
                postgres.url.replace("postgres://", "postgresql://"), autocommit=True
            ) as conn:
                conn.execute("CREATE DATABASE croniq_chaos")
            # The server's URL with another database (and its options: a
            # primary/standby pair's target_session_attrs).
            server, _, options = postgres.url.partition("?")
            self.db = (
                server.rsplit("/", 1)[0] + "/croniq_chaos" + (f"?{options}" if options else "")
            )
        else:
            self.db = f"sqlite:///{self.dir / 'croniq-chaos.sqlite3'}"

    # processes

    def start(self):
        manage(self.db, "migrate", "--no-input")
        self.token = manage(self.db, "create_runner_token", "chaos").stdout.strip().splitlines()[-1]
        web_count, loop_count = (2, 2) if self.backend == "postgresql" else (1, 1)
        for _ in range(web_count):
            self.webs.append(self.new_web())
        for web in self.webs:
            wait_healthy(web)
        for _ in range(loop_count):
            self.loops.append(self.new_loop())
        # Agents 1 and 2 talk to a web process directly, 3 and 4 through a proxy.
        for number in range(1, 5):
            web = self.webs[(number - 1) % len(self.webs)]
            proxy = None
            if number > 2:
                proxy = TcpProxy(web.port)
                self.proxies.append(proxy)
            agent = Agent(f"agent-{number}", proxy.url if proxy else web.url, proxy)
            self.agents.append(agent)
            self.start_agent(agent)
        wait_for(self.all_agents_registered, timeout=60, message="four registered agents")

    def new_web(self, port=None):
        self.web_starts += 1
        log = self.dir / f"web-{self.web_starts}.log"
        return Server(self.db, log, port=port, **SETTINGS)

    def new_loop(self):
        self.loop_count += 1
        log = self.dir / f"loop-{self.loop_count}.log"
        return start_loop(self.db, log, "--interval", str(LOOP_INTERVAL), **SETTINGS)

    def start_agent(self, agent):
        agent.instance += 1
        agent.started.append(agent.label)
        agent.process = start_agent(
            agent.url, self.token, agent.log_path(self.dir),
            "--name", agent.name, "--labels", LABEL, "--capacity", str(AGENT_CAPACITY),
            "--poll-wait", "5", "--drain-timeout", "30",
            CHAOS_AGENT=agent.label,
            CRONIQ_STATE_DIR=self.dir / f"state-{agent.name}",
        )  # fmt: skip

    def running_long_job(self, agent, jobs=LONG_JOBS):
        """The id of a job longer than the lease that `agent` runs now, or None."""
        started, ended = {}, set()
        if not self.ledger.exists():
            return None
        for line in self.ledger.read_text().splitlines():
            parts = line.split()
            if len(parts) == 6 and parts[0] == "start":
                started[parts[1]] = (parts[2], parts[4])
            elif len(parts) == 3:
                ended.add(parts[1])
        for pk, (job, label) in started.items():
            if pk not in ended and label == agent.label and job in jobs:
                return int(pk)
        return None

    def operator_save(self, job_name, hold):
        """An operator saving `job_name` in the admin, `hold` seconds after
        loading it (tests/chaos/admin_operator.py); returns the process."""
        self.operator_saves += 1
        log = self.dir / f"operator-{self.operator_saves}.log"
        args = [sys.executable, "-m", "tests.chaos.admin_operator", job_name, f"{hold:.2f}"]
        return Process(args, process_env(self.db, **SETTINGS), log)

    def all_agents_registered(self):
        names = {row[0] for row in query(self.db, "SELECT name FROM runners_runner")}
        return names >= {a.name for a in self.agents}

    def kill_machine(self, agent):
        """Stop the agent dead with its job processes, as a machine losing power."""
        if agent.process is None or not agent.process.alive():
            return
        kill_machine(agent.process)
        agent.deaths[agent.label] = time.time()
        agent.process = None

    def kill_agent_alone(self, agent):
        """SIGKILL only the agent process, as the OOM killer would: its jobs
        must die with it on their own."""
        if agent.process is not None and agent.process.alive():
            agent.process.kill()
        agent.process = None

    def apply_jobs(self, start_in=2.0):
        """Create the jobs disabled, then enable them all with the same known
        first instant (so the checks know every instant the run must have)."""
        path = jobs_file(self.dir / "jobs.yaml", self.ledger, enabled=False)
        manage(self.db, "apply", str(path))
        now = datetime.now(UTC)
        first = (now + timedelta(seconds=start_in)).replace(microsecond=0)
        self.edit_jobs("SET enabled = %s, next_run_at = %s", (True, first), now)
        names = [name for name, _, _ in JOBS] + [name for name, _, _ in QUEUE_JOBS]
        self.first_instants = dict.fromkeys(names, first)

    def disable_jobs(self):
        """Stop the schedule (no new instants); what is due already still runs."""
        self.edit_jobs("SET enabled = %s", (False,), datetime.now(UTC))

    def edit_jobs(self, assignments, params, now):
        """Write every job as an operator's tool would, telling the loops as
        `Job.save` does: updated_at moves (the edit marker a loop on SQLite
        compares) and, on PostgreSQL, a NOTIFY on the jobs' channel."""
        from scheduler.firing.job_edits import CHANNEL

        sql = f"UPDATE scheduler_job {assignments}, updated_at = %s"
        self.execute(sql, (*params, now), notify=CHANNEL)

    def execute(self, sql, params, notify=None):
        """One committed write from outside the processes under test; on
        PostgreSQL a NOTIFY on `notify` is sent at its commit."""
        if self.db.startswith("sqlite"):
            import sqlite3

            # Django keeps naive UTC text in SQLite.
            params = [
                p.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
                if hasattr(p, "astimezone")
                else p
                for p in params
            ]
            with contextlib.closing(sqlite3.connect(self.db.removeprefix("sqlite:///"))) as conn:
                conn.execute("PRAGMA busy_timeout = 20000")
                conn.execute(sql.replace("%s", "?"), params)
                conn.commit()
            return
        import psycopg

        with psycopg.connect(self.db.replace("postgres://", "postgresql://")) as conn:
            conn.execute(sql, params)
            if notify:
                conn.execute(f"NOTIFY {notify}")

    def active_executions(self):
        """Runs not yet settled: queued (a queue job's backlog), pending or running."""
        return query(
            self.db,
            "SELECT id, state FROM scheduler_execution"
            " WHERE state IN ('queued', 'pending', 'running')",
        )

    def settle(self, stall=60.0, cap=900.0, interval=0.5):
        """Wait until no run is left unsettled, as long as runs keep settling.

        With the jobs disabled, a queue job's backlog drains at its own pace
        (`queue-pair`: two runs of 3 s at a time, against one due every 2 s,
        so ten minutes of faults can leave minutes of it). A run that
        stays put for `stall` seconds ends the wait, and the checks report
        it. Returns whether everything settled."""
        started = last_change = time.monotonic()
        seen = None
        while time.monotonic() - started < cap:
            active = {(pk, state) for pk, state in self.active_executions()}
            if not active:
                return True
            if active != seen:
                seen, last_change = active, time.monotonic()
            elif time.monotonic() - last_change > stall:
                return False
            time.sleep(interval)
        return False

    def metrics(self):
        return [requests.get(web.url + "/metrics", timeout=20).text for web in self.webs]

    def stop(self):
        for agent in self.agents:
            if agent.process is not None:
                agent.process.stop(timeout=40)
        for loop in self.loops:
            loop.stop()
        for proxy in self.proxies:
            proxy.close()

    def stop_webs(self):
        for web in self.webs:
            web.stop()

    def kill_everything(self):
        """Teardown after a failure: nothing may outlive the test."""
        for agent in self.agents:
            self.kill_machine(agent)
        for process in self.loops + self.webs:
            process.kill()
        for proxy in self.proxies:
            proxy.close()

    def logs(self):
        return sorted(self.dir.glob("*.log"))


def kill_machine(process):
    """SIGKILL an agent process and every job it started (each job is a
    process group of its own), as if its machine lost power."""
    pid = process.popen.pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)  # it can start nothing more
    children = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True
    ).stdout.split()
    process.kill()
    for child in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child), signal.SIGKILL)


def sqlite_value(value):
    """Django keeps datetimes in SQLite as naive UTC text."""
    if hasattr(value, "astimezone"):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def wait_healthy(server, timeout=60):
    """Like Server.wait_ready, but a slow answer on a busy machine is not fatal."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"web process exited:\n{server.output()[-3000:]}")
        try:
            if requests.get(server.url + "/healthz", timeout=5).status_code == 200:
                return server
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"web process not healthy after {timeout}s:\n{server.output()[-3000:]}")


def as_utc(value):
    """A datetime from either backend (SQLite returns text) as aware UTC."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# -- faults ------------------------------------------------------------------


class Faults:
    """Seeded random faults; every one that needs healing is healed later by
    `tick()` (or at once by `heal_all()`)."""

    def __init__(self, cluster, rng, log):
        self.cluster = cluster
        self.rng = rng
        self.log = log
        self.injected = {}
        self.timeline = []
        self.pending = []  # (due monotonic time, description, action)
        self.down_agents = set()
        self.cut_proxies = set()
        self.loop_down = False
        self.postgres_down = False

    def note(self, kind, detail):
        self.injected[kind] = self.injected.get(kind, 0) + 1
        line = f"{time.strftime('%H:%M:%S')} {kind}: {detail}"
        self.timeline.append(line)
        self.log(line)

    def later(self, seconds, description, action):
        self.pending.append((time.monotonic() + seconds, description, action))

    def tick(self):
        now = time.monotonic()
        due = [p for p in self.pending if p[0] <= now]
        self.pending = [p for p in self.pending if p[0] > now]
        for _, description, action in due:
            self.timeline.append(f"{time.strftime('%H:%M:%S')} heal: {description}")
            action()

    def heal_all(self):
        for _, description, action in sorted(self.pending, key=lambda p: p[0]):
            self.timeline.append(f"{time.strftime('%H:%M:%S')} heal: {description}")
            action()
        self.pending = []

    def choices(self):
        kinds = {
            "kill_agent": 3,
            "restart_agent": 2,
            "kill_loop": 2,
            "restart_web": 2,
            "cut_network": 3,
            "kill_agent_alone": 2,
            "operator_save": 2,
        }
        if self.cluster.postgres is not None:
            kinds["restart_postgres"] = 1
        if self.failover_ready():
            kinds["failover"] = 1
        if len(self.down_agents) >= 2:
            kinds.pop("kill_agent")
            kinds.pop("restart_agent")
        if len(self.down_agents) >= 2:
            kinds.pop("kill_agent_alone")
        if self.loop_down:
            kinds.pop("kill_loop")
        if len(self.cut_proxies) == len(self.cluster.proxies):
            kinds.pop("cut_network")
        if self.postgres_down:
            kinds.pop("restart_postgres", None)
        return kinds

    def inject(self):
        kinds = self.choices()
        kind = self.rng.choices(list(kinds), weights=list(kinds.values()))[0]
        getattr(self, kind)()

    def live_agents(self):
        return [a for a in self.cluster.agents if a.name not in self.down_agents]

    def kill_agent(self):
        agent = self.rng.choice(self.live_agents())
        self.cluster.kill_machine(agent)
        self.down_agents.add(agent.name)
        dead_for = self.rng.uniform(1, 3) * LEASE_TTL
        self.note("kill_agent", f"SIGKILL {agent.label} and its jobs; back in {dead_for:.1f}s")

        def revive():
            self.cluster.start_agent(agent)
            self.down_agents.discard(agent.name)

        self.later(dead_for, f"start {agent.name} again", revive)

    def restart_agent(self):
        agent = self.rng.choice(self.live_agents())
        old = agent.label
        self.cluster.kill_machine(agent)
        self.cluster.start_agent(agent)
        self.note("restart_agent", f"SIGKILL {old}, start {agent.label} under the same name")

    def kill_agent_alone(self):
        """SIGKILL an agent but not its jobs and start it again under the
        same name at once: the takeover releases its executions for retry,
        so its jobs must already be dead (they write `killed`) or a
        singleton's retry would overlap them. An agent running a singleton
        job longer than the lease is picked when there is one: that job
        would outlive it and overlap its own retry."""
        live = self.live_agents()
        busy = [a for a in live if self.cluster.running_long_job(a, LONG_SINGLETONS)]
        agent = self.rng.choice(busy or live)
        old = agent.label
        self.cluster.kill_agent_alone(agent)
        self.cluster.start_agent(agent)
        self.note("kill_agent_alone", f"SIGKILL {old} alone; {agent.label} under the same name")

    def kill_agent_alone_once(self):
        """kill_agent_alone while some agent runs a long singleton job
        (waiting up to 40 s for one): every run covers the overlap case."""
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and not any(
            self.cluster.running_long_job(a, LONG_SINGLETONS) for a in self.live_agents()
        ):
            time.sleep(0.2)
        self.kill_agent_alone()

    def kill_loop(self):
        loops = self.cluster.loops
        victim = self.rng.randrange(len(loops))
        loops[victim].kill()
        back_in = self.rng.uniform(0.5, 3)
        self.loop_down = True
        self.note("kill_loop", f"SIGKILL loop {victim + 1}; replacement in {back_in:.1f}s")

        def replace():
            loops[victim] = self.cluster.new_loop()
            self.loop_down = False

        self.later(back_in, f"replacement scheduler loop {victim + 1}", replace)

    def restart_web(self):
        webs = self.cluster.webs
        victim = self.rng.randrange(len(webs))
        old = webs[victim]
        crash = self.rng.random() < 0.5
        if crash:
            old.kill()
        else:
            old.stop(timeout=5)
        webs[victim] = self.cluster.new_web(port=old.port)
        how = "SIGKILL" if crash else "SIGTERM"
        self.note("restart_web", f"{how} web {victim + 1} (port {old.port}) and start it again")
        if not self.postgres_down:  # else /healthz answers 503 until it is back
            wait_healthy(webs[victim])

    def cut_network(self):
        agents = [a for a in self.cluster.agents if a.via_proxy and a.name not in self.cut_proxies]
        agent = self.rng.choice(agents)
        mode = "reset" if self.rng.random() < 0.25 else "blackhole"
        seconds = self.rng.uniform(1, 3 * LEASE_TTL)
        agent.via_proxy.cut(mode)
        self.cut_proxies.add(agent.name)
        self.note("cut_network", f"{mode} {agent.name}'s network for {seconds:.1f}s")

        def heal():
            agent.via_proxy.heal()
            self.cut_proxies.discard(agent.name)

        self.later(seconds, f"{agent.name}'s network", heal)

    def operator_save(self):
        """An operator loads a job in the admin and saves a new description a
        moment later, while the loops fire it: the save must not write back
        the fire times it read (that re-fired an instant, or stopped a
        singleton job for good)."""
        name = self.rng.choice([name for name, _, _ in JOBS])
        hold = self.rng.uniform(0.2, 2 * INTERVAL)
        process = self.cluster.operator_save(name, hold)
        self.note("operator_save", f"load {name} in the admin; save a description {hold:.1f}s on")

        def done():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout=60)
            process.stop()  # closes its log; ends it if it still hangs
            lines = process.output().strip().splitlines()
            self.timeline.append(f"{time.strftime('%H:%M:%S')} {lines[-1] if lines else ''}")

        self.later(hold + 5, f"operator save of {name} reported", done)

    def restart_postgres(self):
        postgres = self.cluster.postgres
        down_for = self.rng.uniform(0.5, 3)
        postgres.stop()
        self.postgres_down = True
        self.note("restart_postgres", f"stop PostgreSQL (fast); start again in {down_for:.1f}s")

        def start():
            postgres.start()
            self.postgres_down = False

        self.later(down_for, "start PostgreSQL", start)

    def failover_ready(self):
        """A primary/standby pair (CRONIQ_CHAOS_REPLICA=1, harness/replica.py)
        whose primary is up and whose standby streams."""
        postgres = self.cluster.postgres
        pair = hasattr(postgres, "promote")
        return pair and postgres.standby is not None and not self.postgres_down

    def failover(self):
        """Kill the PostgreSQL primary (SIGKILL of it and its processes: a
        crash), promote its synchronous standby a moment later, then build a
        new standby from the new primary where the old one was, so another
        failover can come. The processes know only the multi-host URL."""
        pair = self.cluster.postgres
        old, new = pair.primary.port, pair.standby.port
        down_for = self.rng.uniform(0.5, 3)
        pair.kill_primary()
        self.postgres_down = True
        self.note("failover", f"SIGKILL primary :{old}; promote standby :{new} in {down_for:.1f}s")

        def promote():
            pair.promote()
            self.postgres_down = False
            self.later(1, f"a new standby at :{old}", rebuild)

        def rebuild():
            if self.postgres_down:  # restart_postgres stopped the new primary
                self.later(1, f"a new standby at :{old}", rebuild)
                return
            pair.rebuild_standby()

        self.later(down_for, f"promote :{new}", promote)

    def failover_once(self):
        """A failover at the start of every run on a pair (random ones follow)."""
        if self.failover_ready():
            self.failover()

    def fence_then_heal(self):
        """Cut a proxied agent while it runs a job longer than the lease, until
        it kills that job itself (self-fencing), then heal at once: the
        runner's report of the kill reaches the server before the lease
        expires there. Injected once per run, so every run covers the case."""
        agents = [
            a
            for a in self.cluster.agents
            if a.via_proxy and a.name not in self.cut_proxies and a.name not in self.down_agents
        ]
        agent = self.rng.choice(agents)
        execution = None
        deadline = time.monotonic() + 40
        while execution is None and time.monotonic() < deadline:
            execution = self.cluster.running_long_job(agent)
            time.sleep(0.2)
        if execution is None:
            self.note("fence_then_heal", f"{agent.label} ran no long job within 40s; not done")
            return
        agent.via_proxy.cut()
        fenced = f"execution {execution}: killed by the runner"
        log_path = agent.log_path(self.cluster.dir)
        deadline = time.monotonic() + LEASE_TTL + 10
        while fenced not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        agent.via_proxy.heal()
        outcome = "fenced it" if fenced in log_path.read_text() else "did NOT fence it"
        self.note(
            "fence_then_heal",
            f"cut {agent.label} while it ran execution {execution}; it {outcome}; healed",
        )

    def run(
        self,
        seconds,
        mean_gap,
        scripted=("operator_save", "fence_then_heal", "kill_agent_alone_once", "failover_once"),
    ):
        """Inject the scripted faults, then random ones for `seconds`."""
        deadline = time.monotonic() + seconds
        for kind in scripted:
            getattr(self, kind)()
        next_fault = time.monotonic() + self.rng.expovariate(1 / mean_gap)
        while time.monotonic() < deadline:
            self.tick()
            if time.monotonic() >= next_fault:
                self.inject()
                next_fault = time.monotonic() + self.rng.expovariate(1 / mean_gap)
            time.sleep(0.1)
        self.heal_all()
