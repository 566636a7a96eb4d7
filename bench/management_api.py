"""Management API benchmarks (docs/design.md §8). Prints one JSON line per figure:

- jobs_page: `GET /api/v1/jobs?limit=100`, the first page, with 2,000 jobs
  (p50, target <= 20 ms). Skipped when this build has no jobs list.
- executions_page: `GET /api/v1/executions?limit=100`, the first page, with
  1,000,000 executions (p50, target <= 50 ms); also one job's first page,
  and the first page of a key bound to a project (docs/design.md §11) of
  one job ("one-job"), of half the jobs ("half"), of one job that ran only
  long ago ("retired": its 10 runs are the oldest) and of one that never ran
  ("idle": a page that finds nothing).
- trigger_to_running: `POST /api/v1/jobs/{name}/trigger` until a runner
  waiting in a long-poll holds the execution (real uvicorn, HTTP; p50,
  target <= 20 ms).

The two pages are timed in-process (Django's test client: the server's time,
no network). The database is a temporary SQLite file, or a fresh PostgreSQL
database (dropped after) when DATABASE_URL is a postgres:// URL:

    .venv/bin/python bench/management_api.py
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/croniq_api_bench \
        .venv/bin/python bench/management_api.py

Options: --rows N (executions, default 1,000,000) --jobs N (default 2,000)
         --runs N (timed calls per figure) --only jobs,executions,trigger
"""

import argparse
import re
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dispatch_latency import (  # noqa: E402 - after the path is set
    Runner,
    backend,
    drop_database,
    emit,
    ms,
    new_token,
    percentile,
    prepare_database,
    start_web,
)

JOBS = 2_000
ROWS = 1_000_000
RUNS = 30
TARGETS_MS = {"jobs_page": 20, "executions_page": 50, "trigger_to_running": 20}

# Row i belongs to job i % jobs and lies i / jobs hours back; all finished.
EXECUTIONS_SQL = """
INSERT INTO scheduler_execution (job_id, scheduled_for, attempt, "trigger", state, singleton,
  run_after, session, lease, created_at, claimed_at, finished_at, exit_code, error,
  lost_reason, log_size, log_truncated, env)
SELECT j.id, @TS[@NOW - (i / @JOBS) * 3600], 1, 'schedule',
  CASE WHEN i % 17 = 0 THEN 'failed' ELSE 'succeeded' END, FALSE,
  @TS[@NOW - (i / @JOBS) * 3600], '', 1, @TS[@NOW - (i / @JOBS) * 3600],
  @TS[@NOW - (i / @JOBS) * 3600 + 1], @TS[@NOW - (i / @JOBS) * 3600 + 5],
  CASE WHEN i % 17 = 0 THEN 1 ELSE 0 END, '', '', 0, FALSE, '{}'
FROM @SEQ AS s
JOIN (SELECT id, ROW_NUMBER() OVER (ORDER BY id) - 1 AS rn FROM scheduler_job) AS j
  ON j.rn = s.i % @JOBS
"""


def for_backend(sql, vendor, last):
    if vendor == "postgresql":
        sql = sql.replace("@SEQ AS s", f"generate_series(0::bigint, {last}) AS s(i)")
        return re.sub(r"@TS\[(.*?)\]", r"to_timestamp(\1)", sql)
    sql = re.sub(r"@TS\[(.*?)\]", r"datetime(\1, 'unixepoch')", sql.replace("@SEQ", "seq"))
    cte = f"WITH RECURSIVE seq(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM seq WHERE i < {last})"
    return cte + sql


def seed(jobs, rows):
    from django.db import connection
    from django.utils import timezone

    from scheduler.models import Job

    started = time.perf_counter()
    from projects.models import Project

    Job.objects.bulk_create(
        (
            Job(name=f"bench-{i:05}", schedule="0 * * * *", command="true", enabled=False,
                labels=["linux"] if i % 2 else [], project=project_of(i, jobs))
            for i in range(jobs)
        ),
        batch_size=500,
    )  # fmt: skip
    projects = ("one-job", "half", "retired", "idle")
    Project.objects.bulk_create(Project(name=name) for name in projects)
    sql = EXECUTIONS_SQL.replace("@NOW", str(int(timezone.now().timestamp())))
    sql = for_backend(sql.replace("@JOBS", str(jobs)), connection.vendor, rows - 1)
    with connection.cursor() as cursor:
        if rows:
            cursor.execute(sql)
        Job.objects.create(name="bench-idle", schedule="0 * * * *", command="true",
                           enabled=False, project="idle")  # fmt: skip
        retired = Job.objects.get(project="retired").pk
        cursor.execute(
            "DELETE FROM scheduler_execution WHERE job_id = %s AND id NOT IN"
            " (SELECT id FROM scheduler_execution WHERE job_id = %s ORDER BY id LIMIT 10)",
            [retired, retired],
        )
        # A table that grew row by row has been vacuumed along the way; a
        # million rows inserted at once have not, and autovacuum would run
        # beside the timed calls (PostgreSQL). Start from the steady state.
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
    emit(bench="management_api", step="seed", jobs=jobs, executions=rows,
         seconds=round(time.perf_counter() - started, 1))  # fmt: skip


def project_of(i, jobs):
    """Job i's project: the last job alone in "one-job", the first in
    "retired", every other in "half"."""
    if i in (0, jobs - 1):
        return "retired" if i == 0 else "one-job"
    return "half" if i % 2 else "default"


def api_key(*scopes, project=""):
    from control.models import ApiKey

    name = f"bench-{'-'.join(scopes)}-{time.time_ns()}"
    return ApiKey.issue(name, list(scopes), project=project)[1]


def time_gets(path, secret, runs):
    """Server times (ms) of `runs` GETs of `path`, after one warm-up call."""
    from django.test import Client

    client = Client(HTTP_HOST="localhost")
    headers = {"authorization": f"Bearer {secret}"}
    answer = client.get(path, headers=headers)
    if answer.status_code != 200:
        return answer.status_code, []
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        client.get(path, headers=headers)
        times.append(time.perf_counter() - started)
    return 200, times


def report(name, url, times, **extra):
    p50 = statistics.median(times)
    emit(bench="management_api", backend=backend(url), case=name, runs=len(times),
         p50_ms=ms(p50), p99_ms=ms(percentile(times, 99)), target_ms=TARGETS_MS[name],
         met=p50 * 1000 <= TARGETS_MS[name], **extra)  # fmt: skip


def jobs_page(url, runs):
    status, times = time_gets("/api/v1/jobs?limit=100", api_key("jobs:read"), runs)
    if status != 200:
        emit(bench="management_api", backend=backend(url), case="jobs_page",
             skipped=f"GET /api/v1/jobs answered {status}")  # fmt: skip
        return
    report("jobs_page", url, times)


def executions_page(url, runs):
    from scheduler.models import Job

    secret = api_key("executions:read")
    _, times = time_gets("/api/v1/executions?limit=100", secret, runs)
    report("executions_page", url, times, filter="none")
    name = Job.objects.order_by("pk").values_list("name", flat=True).first()
    _, times = time_gets(f"/api/v1/executions?limit=100&job={name}", secret, runs)
    report("executions_page", url, times, filter="job")
    for project in ("one-job", "half", "retired", "idle"):
        secret = api_key("executions:read", project=project)
        _, times = time_gets("/api/v1/executions?limit=100", secret, runs)
        report("executions_page", url, times, filter="none", key_bound_to=project)


def trigger_to_running(url, runs):
    """A runner waits in a long-poll; each trigger is timed until its
    execution arrives in the runner's hands."""
    import requests

    from scheduler.models import Job

    Job.objects.create(name="bench-trigger", schedule="@daily", command="true")
    workdir = Path(tempfile.mkdtemp(prefix="croniq-api-bench-"))
    server = start_web(url, workdir)
    try:
        runner = Runner(server.url, new_token(), capacity=1)
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {api_key('jobs:trigger')}"
        times, answers = [], []
        for _ in range(runs + 1):  # the first one warms up
            got = []
            polling = threading.Thread(target=lambda got=got: got.append(runner.poll(wait=10)))
            polling.start()
            time.sleep(0.2)  # the poll is waiting in the hub
            sent = time.time()
            answer = http.post(f"{server.url}/api/v1/jobs/bench-trigger/trigger", json={})
            answers.append(time.time() - sent)
            answer.raise_for_status()
            polling.join()
            [(executions, arrived)] = got
            assert executions and executions[0]["id"] == answer.json()["execution_id"]
            runner.finish(executions[0])
            times.append(arrived - sent)
        # answer_p50_ms: the trigger call alone, until its answer is back.
        answer_p50 = ms(statistics.median(answers[1:]))
        report("trigger_to_running", url, times[1:], answer_p50_ms=answer_p50)
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--only", default="jobs,executions,trigger")
    args = parser.parse_args()
    only = set(args.only.split(","))
    url = prepare_database()
    try:
        seed(args.jobs, args.rows)
        if "jobs" in only:
            jobs_page(url, args.runs)
        if "executions" in only:
            executions_page(url, args.runs)
        if "trigger" in only:
            trigger_to_running(url, args.runs)
    finally:
        drop_database(url)


if __name__ == "__main__":
    main()
