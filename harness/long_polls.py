"""Many open long-polls against a real web process, each on a raw socket of
its own (no thread each): what the stop tests and bench/web_stop.py hold
open when they send SIGTERM.

Each poll is a runner of its own, created a few seconds silent, so the
database tells when every poll has done its first step and waits in the
hub: that step marks its runner seen (`polls_waiting`). A few seconds, not
more: a scheduler loop beside the server (`serve`) would take runners
silent for longer offline, and forget those silent for days.
"""

import asyncio
import json
import resource
import sqlite3
import uuid
from contextlib import closing
from typing import Any, NamedTuple

from harness.processes import manage, query

IDLE_RUNNERS = """
import json
from datetime import timedelta
from django.utils import timezone
from runners.models import Runner, RunnerToken

token, secret = RunnerToken.issue({prefix!r})
# Past the interval within which a call does not touch its runner again.
seen = timezone.now() - timedelta(seconds=3)
runners = Runner.objects.bulk_create(
    Runner(name=f"{prefix}-{{n}}", token=token, labels=["nothing-matches"], session=f"s{{n}}",
           registered_at=seen, last_seen_at=seen)
    for n in range({count})
)
result = None
{then}
print(json.dumps({{
    "secret": secret,
    "seen": seen.strftime("%Y-%m-%d %H:%M:%S.%f+00:00"),
    "runners": [[r.pk, r.session] for r in runners],
    "then": result,
}}))
"""


def raise_open_file_limit(sockets: int) -> None:
    """Let this process (and the servers it starts, which inherit it) hold
    `sockets` connections: the soft limit is often 1,024."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = sockets + 512
    if soft != resource.RLIM_INFINITY and soft < wanted:
        limit = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


class IdleRunners(NamedTuple):
    prefix: str  # their names' (`prefix-N`)
    secret: str  # their token's
    seen: str  # when they were last seen, as SQL compares it on both backends
    runners: list[tuple[int, str]]  # (runner id, session)
    then: Any  # what `then` set `result` to


def idle_runners(database_url: str, count: int, then: str = "") -> IdleRunners:
    """`count` runners of one new token, none of whose labels any job carries.

    `then`: more Python for the same `manage.py shell` (one process start
    less), at the top level, with `token` and `secret` at hand; what it
    assigns to `result` comes back (JSON)."""
    prefix = f"idle-{uuid.uuid4().hex[:8]}"
    code = IDLE_RUNNERS.format(prefix=prefix, count=count, then=then)
    made = json.loads(manage(database_url, "shell", "-c", code).stdout.strip().splitlines()[-1])
    runners = [(pk, session) for pk, session in made["runners"]]
    return IdleRunners(prefix, made["secret"], made["seen"], runners, made["then"])


def polls_waiting(database_url: str, idle: IdleRunners) -> int:
    """How many of the `idle` runners a poll has reached."""
    sql = "SELECT COUNT(*) FROM runners_runner WHERE name LIKE %s AND last_seen_at > %s"
    return query(database_url, sql, (f"{idle.prefix}-%", idle.seen))[0][0]


def poll_request(port: int, secret: str, runner_id: int, session: str, wait: float) -> bytes:
    body = json.dumps({"session": session, "wait": wait, "capacity": 1}).encode()
    head = (
        f"POST /api/v1/runners/{runner_id}/poll HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {secret}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class OpenPoll:
    """One long-poll on its own connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def answer(self) -> tuple[int, dict[str, str], object]:
        """(status, headers, the body's JSON, or its text when it is not
        JSON); (0, {}, reason) when the connection closed without an answer."""
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            return 0, {}, repr(error)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        try:
            return status, headers, json.loads(body)
        except ValueError:  # an error page: its text
            return status, headers, body.decode(errors="replace")

    def close(self) -> None:
        self.writer.close()


async def open_polls(
    port: int, secret: str, runners: list[tuple[int, str]], wait: float = 60
) -> list[OpenPoll]:
    """One long-poll per runner, sent; each waits up to `wait` seconds."""
    polls = []
    for runner_id, session in runners:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(poll_request(port, secret, runner_id, session, wait))
        polls.append(OpenPoll(reader, writer))
    await asyncio.gather(*(poll.writer.drain() for poll in polls))
    return polls


def execute(database_url: str, sql: str, params: tuple = ()) -> None:
    """A statement that writes (`harness.processes.query` reads), committed."""
    if database_url.startswith("sqlite"):
        path = database_url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(path, timeout=20)) as conn, conn:
            conn.execute(sql.replace("%s", "?"), params)
        return
    import psycopg

    with psycopg.connect(database_url.replace("postgres://", "postgresql://")) as conn:
        conn.execute(sql, params)
