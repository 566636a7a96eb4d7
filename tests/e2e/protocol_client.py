"""A plain HTTP client for the runner protocol, and helpers that seed and read
the e2e database through `manage.py shell` (another process, as in production).
"""

import json
import textwrap
import time
import uuid

import requests

from harness.processes import Server, manage
from tests.agent.world import python

SEED = """
import json, time
from datetime import timedelta
from django.utils import timezone
from scheduler.models import Execution, Job
from dispatch.notify import notify_new_work

now = timezone.now()
ids = []
for spec in json.loads({specs!r}):
    job, _ = Job.objects.get_or_create(
        name=spec["job"],
        defaults=dict(
            schedule="@every 1h",
            command=spec.get("command", "true"),
            labels=spec.get("labels", []),
            env=spec.get("env", {{}}),
            timeout=spec.get("timeout"),
            retries=spec.get("retries", 0),
            singleton=spec.get("singleton", False),
        ),
    )
    at = now + timedelta(seconds=spec.get("delay", 0))
    execution = Execution.objects.create(
        job=job,
        scheduled_for=at - timedelta(microseconds=len(ids)),
        run_after=at,
        created_at=now,
        singleton=job.singleton,
    )
    ids.append(execution.pk)
notify_new_work()
print(json.dumps({{"ids": ids, "committed_at": time.time()}}))
"""


def start_server(db_url, log_path, timeout=60, **env):
    """A uvicorn for `db_url`, ready. On a busy machine the first request can
    take longer than `Server.wait_ready`'s one-second read timeout: wait on."""
    server = Server(db_url, log_path, **env)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return server.wait_ready(timeout=max(1, deadline - time.monotonic()))
        except requests.Timeout:
            if time.monotonic() > deadline:
                server.stop()
                raise


def token(db_url, name=None):
    """A new runner token's secret, created with the management command."""
    name = name or f"token-{uuid.uuid4().hex[:8]}"
    return manage(db_url, "create_runner_token", name).stdout.strip()


def seed(db_url, *specs):
    """Create pending executions ({"job", "labels"?, "delay"?, ...}); returns their ids."""
    return seed_timed(db_url, *specs)["ids"]


def seed_timed(db_url, *specs):
    code = SEED.format(specs=json.dumps(list(specs)))
    return json.loads(python(db_url, code).strip().splitlines()[-1])


def query(db_url, code):
    """Run `code` (which assigns `result`) in the e2e database; returns `result`."""
    script = textwrap.dedent(code) + "\nimport json\nprint(json.dumps(result, default=str))\n"
    return json.loads(python(db_url, script).strip().splitlines()[-1])


def execution_row(db_url, pk):
    return query(
        db_url,
        f"""
        from scheduler.models import Execution
        e = Execution.objects.get(pk={pk})
        result = dict(
            state=e.state, lease=e.lease, session=e.session, runner=e.runner_id,
            exit_code=e.exit_code, error=e.error, lost_reason=e.lost_reason,
            log_size=e.log_size, log_truncated=e.log_truncated,
            lease_expires_at=e.lease_expires_at, finished_at=e.finished_at,
            logs=[(c.seq, c.data) for c in e.log_chunks.order_by("seq")],
        )
        """,
    )


class RunnerClient:
    """One runner process speaking the protocol (docs/design.md §4)."""

    def __init__(self, url, secret, name=None, labels=(), session=None, capacity=1):
        self.url = url
        self.secret = secret
        self.name = name or f"runner-{uuid.uuid4().hex[:8]}"
        self.labels = list(labels)
        self.session = session or uuid.uuid4().hex
        self.capacity = capacity
        self.runner_id = None
        self.http = requests.Session()

    def post(self, path, body, secret=None, timeout=70, **kwargs):
        headers = {"Authorization": f"Bearer {secret or self.secret}"}
        return self.http.post(
            self.url + path, json=body, headers=headers, timeout=timeout, **kwargs
        )

    def register(self, **extra):
        body = {"name": self.name, "labels": self.labels, "session": self.session}
        body.update(capacity=self.capacity, **extra)
        answer = self.post("/api/v1/runners/register", body)
        if answer.status_code == 200:
            self.runner_id = answer.json()["runner_id"]
        return answer

    def poll(self, wait=0, capacity=None, session=None):
        body = {"session": session or self.session, "wait": wait}
        body["capacity"] = capacity or self.capacity
        return self.post(f"/api/v1/runners/{self.runner_id}/poll", body)

    def claim(self, wait=0, capacity=None):
        answer = self.poll(wait, capacity)
        assert answer.status_code == 200, answer.text
        return answer.json()["executions"]

    def heartbeat(self, held, session=None):
        body = {
            "session": session or self.session,
            "executions": [{"id": pk, "lease": lease} for pk, lease in held],
        }
        return self.post(f"/api/v1/runners/{self.runner_id}/heartbeat", body)

    def logs(self, pk, lease, seq, data, session=None):
        body = {"session": session or self.session, "lease": lease, "seq": seq, "data": data}
        return self.post(f"/api/v1/executions/{pk}/logs", body)

    def finish(self, pk, lease, exit_code=0, session=None, **extra):
        body = {"session": session or self.session, "lease": lease, "exit_code": exit_code}
        body.update(extra)
        return self.post(f"/api/v1/executions/{pk}/finish", body)
