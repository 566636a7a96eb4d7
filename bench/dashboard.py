"""Dashboard pages at scale: 2,000 jobs, 1,000,000 executions, 200,000 audit
events, and one busy job run every minute for 50,000 minutes (its page draws
1,000 runs and reads 43,200 in its 30-day statistics). Prints one JSON line
per page with its server time (Django test client, a staff user, median of
several runs) and its number of queries, against the page's target: 100 ms
for the overview (failure heat-map) and the job pages (duration insight),
300 ms for the others.

    .venv/bin/python bench/dashboard.py         # SQLite, a temporary file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_dash_bench \
        .venv/bin/python bench/dashboard.py
    .venv/bin/python bench/dashboard.py overview   # the pages named overview...

Arguments name the pages to measure by the start of their names (all
without one). The overview is measured plain, filtered (by tag, label,
owner, project, state, a few at once), as an operator sees it, with the bulk
actions' count of the jobs the filter matches, and as the operator of one
project sees it (its roles read, its project's jobs alone: `_member`).

The database is migrated and seeded with raw INSERT ... SELECT (a recursive
CTE on SQLite, generate_series on PostgreSQL). A PostgreSQL database that does
not exist is created; one that already holds the bench data is reused as is.
"""

import atexit
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JOBS = 2_000
PROJECTS = 8  # the jobs spread over them; the member holds a role in the first
EXECUTIONS = 1_000_000
AUDIT_EVENTS = 200_000
RUNNERS = 50
BIG_LOG_CHUNKS = 2_000
BUSY_RUNS = 50_000  # one a minute: about 35 days
TARGET_MS = 300
INSIGHT_TARGET_MS = 100
RUNS = 7
HOUR = 3600


def emit(**fields):
    print(json.dumps(fields), flush=True)


def prepare_database():
    """The database to seed; a temporary SQLite file (removed at exit) by default."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        folder = tempfile.mkdtemp(prefix="croniq-dashboard-bench-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        url = f"sqlite:///{Path(folder) / 'dashboard-bench.sqlite3'}"
    elif url.startswith("postgres"):
        create_postgres_database(url)
    os.environ["DATABASE_URL"] = url
    return url


def create_postgres_database(url):
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django():
    os.environ.setdefault("SECRET_KEY", "croniq-bench")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


# Seeding


def seed(now):
    from scheduler.models import Job

    if Job.objects.filter(name="bench-0000").exists():
        emit(bench="dashboard", step="seed", reused=True)
        return
    started = time.perf_counter()
    seed_jobs(now)
    seed_runners(now)
    vendor = connection_vendor()
    run_sql(for_backend(EXECUTIONS_SQL, vendor), now)
    run_sql(for_backend(AUDIT_SQL, vendor), now)
    run_sql(for_backend(BUSY_SQL, vendor), now)
    seed_logs_and_counters(now)
    run_sql("ANALYZE", now)
    emit(
        bench="dashboard",
        step="seed",
        jobs=JOBS,
        executions=EXECUTIONS,
        audit_events=AUDIT_EVENTS,
        seconds=round(time.perf_counter() - started, 1),
    )


def connection_vendor():
    from django.db import connection

    return connection.vendor


def seed_jobs(now):
    from datetime import timedelta

    from calendars.models import Calendar
    from projects.models import Project
    from scheduler.models import Job

    Project.objects.bulk_create(Project(name=f"project-{n}") for n in range(PROJECTS))
    workdays = Calendar.objects.create(
        name="bench-workdays", weekdays=["mon", "tue", "wed", "thu", "fri"]
    )
    schedules = ["0 * * * *", "*/5 * * * *", "30 2 * * *", "@every 10m", "15 9 * * 1-5"]
    Job.objects.create(
        name="busy-every-minute",
        schedule="* * * * *",
        command="run-task --busy",
        next_run_at=now + timedelta(minutes=1),
        last_scheduled_at=now,
    )
    Job.objects.bulk_create(
        (
            Job(
                name=f"bench-{i:04}",
                schedule=schedules[i % len(schedules)],
                command=f"run-task --id {i}",
                timezone="Europe/Berlin" if i % 3 else "UTC",
                calendar=workdays if i % 10 == 4 else None,
                labels=["linux"] if i % 2 else [],
                # Tags and owners for the filtered overviews: billing on a
                # tenth of the jobs, nightly on a third.
                tags=[tag for tag, every in (("billing", 10), ("nightly", 3)) if i % every == 0],
                owner=f"team-{i % 8}",
                project=f"project-{i % PROJECTS}",
                next_run_at=now + timedelta(minutes=i % 60),
                last_scheduled_at=now - timedelta(minutes=1),
            )
            for i in range(JOBS)
        ),
        batch_size=500,
    )


def seed_runners(now):
    from datetime import timedelta

    from runners.models import Runner

    Runner.objects.bulk_create(
        Runner(
            name=f"runner-{i:02}",
            labels=["linux", f"zone-{i % 3}"],
            session=f"s{i}",
            state="online" if i % 10 else "offline",
            registered_at=now - timedelta(days=3),
            last_seen_at=now - timedelta(seconds=i),
            capacity=8,
            takeover_count=12 if i < 3 else i % 4,
            flapping=i < 3,
            flapping_since=now - timedelta(minutes=5) if i < 3 else None,
        )
        for i in range(RUNNERS)
    )


def run_sql(sql, now):
    from django.db import connection

    for token, value in (
        ("@NOW", int(now.timestamp())),
        ("@JOBS", JOBS),
        ("@RUNNERS", RUNNERS),
        ("@LAST_EXECUTION", EXECUTIONS - 1),
        ("@LAST_AUDIT", AUDIT_EVENTS - 1),
        ("@LAST_BUSY", BUSY_RUNS - 1),
    ):
        sql = sql.replace(token, str(value))
    with connection.cursor() as cursor:
        cursor.execute(sql)


# Row i belongs to job n = i % JOBS and lies k = i / JOBS hours back. The
# newest run of every tenth job is running (on a runner), of the next tenth
# pending; older runs are mostly successes with failures sprinkled in.
EXECUTIONS_SQL = """
INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger", state, singleton,
  run_after, runner_id, session, lease, created_at, claimed_at, finished_at, exit_code, error,
  lost_reason, log_size, log_truncated)
SELECT job_id, @TS[t], 1, 'schedule', state, FALSE, @TS[t],
  CASE WHEN state = 'running' THEN (SELECT MIN(id) FROM runners_runner) + n % @RUNNERS END,
  '', 1, @TS[t],
  CASE WHEN state = 'pending' THEN NULL ELSE @TS[t + 1] END,
  CASE WHEN state IN ('pending', 'running') THEN NULL ELSE @TS[t + 1 + (i * 37) % 300] END,
  CASE state WHEN 'succeeded' THEN 0 WHEN 'failed' THEN 1 END,
  '', CASE WHEN state = 'lost' THEN 'lease_expired' ELSE '' END, 0, FALSE
FROM (
  SELECT i, n, k, job_id, @NOW - @NOW % 3600 - k * 3600 AS t,
    CASE
      WHEN k = 0 AND n % 10 = 0 THEN 'running'
      WHEN k = 0 AND n % 10 = 1 THEN 'pending'
      WHEN (i * 7919) % 100 < 86 THEN 'succeeded'
      WHEN (i * 7919) % 100 < 94 THEN 'failed'
      WHEN (i * 7919) % 100 < 97 THEN 'timed_out'
      WHEN (i * 7919) % 100 < 99 THEN 'lost'
      ELSE 'cancelled'
    END AS state
  FROM (SELECT i, i % @JOBS AS n, i / @JOBS AS k FROM @SEQ(@LAST_EXECUTION)) AS s
  JOIN (SELECT id AS job_id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS rn
        FROM scheduler_job WHERE name LIKE 'bench-%') AS j ON j.rn = s.n
) AS r
"""

# The busy job: run i was scheduled i minutes back and took 1 to 90 s;
# about one in twenty failed.
BUSY_SQL = """
INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger", state, singleton,
  run_after, runner_id, session, lease, created_at, claimed_at, finished_at, exit_code, error,
  lost_reason, log_size, log_truncated)
SELECT (SELECT id FROM scheduler_job WHERE name = 'busy-every-minute'), @TS[t], 1, 'schedule',
  CASE WHEN (i * 7919) % 20 = 0 THEN 'failed' ELSE 'succeeded' END, FALSE, @TS[t], NULL, '', 1,
  @TS[t], @TS[t + 1], @TS[t + 2 + (i * 37) % 90],
  CASE WHEN (i * 7919) % 20 = 0 THEN 1 ELSE 0 END, '', '', 0, FALSE
FROM (SELECT i, @NOW - @NOW % 60 - 60 - i * 60 AS t FROM @SEQ(@LAST_BUSY)) AS r
"""

AUDIT_SQL = """
INSERT INTO audit_auditevent (at, actor_kind, actor_name, action, target_type, target_id,
  target_repr, data)
SELECT @TS[@NOW - i * 7],
  CASE i % 4 WHEN 0 THEN 'user' WHEN 1 THEN 'runner' ELSE 'system' END,
  CASE i % 4 WHEN 0 THEN 'alice' WHEN 1 THEN 'runner-' || (i % 50) ELSE '' END,
  CASE i % 6 WHEN 0 THEN 'job.pause' WHEN 1 THEN 'runner.takeover'
    WHEN 2 THEN 'execution.reaped' WHEN 3 THEN 'execution.retry'
    WHEN 4 THEN 'job.run_now' ELSE 'scheduler.misfire' END,
  CASE WHEN i % 6 = 1 THEN 'runners.runner' ELSE 'scheduler.job' END,
  CAST(i % 2000 AS TEXT),
  'bench-' || (i % 2000),
  '{}'
FROM @SEQ(@LAST_AUDIT)
"""


def for_backend(sql, vendor):
    """Number rows with a recursive CTE on SQLite and generate_series on
    PostgreSQL; SQLite stores datetimes as the text datetime() writes."""
    last = re.search(r"@SEQ\((@\w+)\)", sql).group(1)
    if vendor == "postgresql":
        sql = sql.replace(f"@SEQ({last})", f"generate_series(0::bigint, {last}) AS g(i)")
        return re.sub(r"@TS\[(.*?)\]", r"to_timestamp(\1)", sql)
    sql = sql.replace(f"@SEQ({last})", "seq")
    sql = re.sub(r"@TS\[(.*?)\]", r"datetime(\1, 'unixepoch')", sql)
    cte = f"WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {last})"
    return cte + sql


def seed_logs_and_counters(now):
    from django.db.models import Count

    import audit
    from scheduler.models import Execution, LogChunk

    running = list(Execution.objects.filter(state="running").values_list("id", flat=True))
    LogChunk.objects.bulk_create(
        LogChunk(execution_id=pk, seq=seq, data=f"step {seq}: working\n")
        for pk in running
        for seq in range(20)
    )
    big = Execution.objects.filter(state="succeeded").order_by("-id").first()
    LogChunk.objects.bulk_create(
        (
            LogChunk(execution_id=big.pk, seq=seq, data=f"line {seq}: " + "x" * 90 + "\n")
            for seq in range(BIG_LOG_CHUNKS)
        ),
        batch_size=500,
    )
    Execution.objects.filter(pk=big.pk).update(log_size=BIG_LOG_CHUNKS * 100)
    for row in Execution.objects.values("state").annotate(n=Count("id")):
        if row["state"] not in Execution.ACTIVE_STATES:
            audit.increment("croniq_executions_total", row["n"], state=row["state"])


# Measuring


def pages():
    from scheduler.models import Execution, Job

    busy = Job.objects.get(name="bench-0000")
    running = Execution.objects.filter(state="running").order_by("id").first()
    big_log = Execution.objects.filter(log_size__gt=0, state="succeeded").first()
    return {
        "overview": "/",
        "overview_last_page": f"/?page={JOBS // 50}",
        "overview_by_name": "/?q=bench-1",
        "overview_by_tag": "/?tag=nightly",
        "overview_by_label": "/?label=linux",
        "overview_by_owner": "/?owner=team-3",
        "overview_failing": "/?state=failing",
        "overview_running": "/?state=running",
        "overview_waiting": "/?state=waiting",
        "overview_several_filters": "/?tag=nightly&label=linux&owner=team-3&state=active",
        "overview_by_project": "/?project=project-3",
        # As who may act on many jobs sees it: the matching jobs counted too.
        "overview_operator_by_tag": "/?tag=billing",
        # As the operator of one project sees it: its jobs alone, its roles read.
        "overview_member": "/",
        "overview_member_by_tag": "/?tag=billing",
        "job_member": f"/jobs/{busy.name}/",
        "job": f"/jobs/{busy.name}/",
        "job_busy_every_minute": "/jobs/busy-every-minute/",
        "job_calendar": "/jobs/bench-0004/",
        "job_history_page_9": f"/jobs/{busy.name}/?page=9",
        "job_history_lost_only": f"/jobs/{busy.name}/?state=lost",
        "execution_running": f"/executions/{running.pk}/",
        "execution_big_log": f"/executions/{big_log.pk}/",
        "execution_log_poll": f"/executions/{running.pk}/log?after=19",
        "execution_log_all": f"/executions/{big_log.pk}/log?after=-1",
        "runners": "/runners/",
        "audit": "/audit/",
        "audit_page_200": "/audit/?page=200",
        "audit_action": "/audit/?action=runner.takeover",
        "audit_action_prefix": "/audit/?action=execution.",
        "audit_actor": "/audit/?actor=alice",
        "audit_target": "/audit/?target=scheduler.job:17",
        "audit_target_text": "/audit/?target=bench-1999",
        # No match: the filter reads every event (the worst case).
        "audit_target_text_no_match": "/audit/?target=no-such-target",
        "audit_actor_no_match": "/audit/?actor=nobody",
    }


def staff_client(group="Croniq viewers", username="bench-viewer"):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": True})
    # The pages show to staff holding the view permissions (migrate made the group).
    user.groups.add(Group.objects.get(name=group))
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def member_client(project="project-0", username="bench-member"):
    from django.contrib.auth import get_user_model
    from django.test import Client

    from projects.models import Project, Role

    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": True})
    where, _ = Project.objects.get_or_create(name=project)
    Role.objects.get_or_create(project=where, user=user, defaults={"role": "operator"})
    client = Client(HTTP_HOST="localhost")
    client.force_login(user)
    return client


def measure(client, name, url, backend):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    answer = client.get(url)  # warm-up (and a check that the page works)
    if answer.status_code != 200:
        raise SystemExit(f"{url}: HTTP {answer.status_code}")
    times, cpu = [], []
    for _ in range(RUNS):
        started, cpu_started = time.perf_counter(), time.process_time()
        client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    median = statistics.median(times)
    target = INSIGHT_TARGET_MS if name.startswith(("overview", "job")) else TARGET_MS
    emit(
        bench="dashboard",
        backend=backend,
        page=name,
        url=url,
        median_ms=round(median, 1),
        max_ms=round(max(times), 1),
        # This process's CPU (Django and, on SQLite, the database): what
        # another process's load on the machine leaves alone.
        cpu_ms=round(statistics.median(cpu), 1),
        queries=len(queries.captured_queries),
        target_ms=target,
        met=median <= target,
    )


def main():
    from datetime import UTC, datetime

    prepare_database()
    setup_django()
    now = datetime.now(UTC)
    seed(now)
    backend = connection_vendor()
    viewer = staff_client()
    operator = staff_client("Croniq operators", "bench-operator")
    # The member holds its role where the busy job is: a database seeded
    # before projects existed (reused as is) has every job in `default`.
    from scheduler.models import Job

    member = member_client(Job.objects.get(name="bench-0000").project)
    wanted = tuple(sys.argv[1:])
    for name, url in pages().items():
        if wanted and not name.startswith(wanted):
            continue
        client = operator if "_operator" in name else member if "_member" in name else viewer
        # A missed target is reported in its line ("met": false), not an error.
        measure(client, name, url, backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
