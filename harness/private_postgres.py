"""A PostgreSQL server of the test's own, so a test can stop and start it
without disturbing the shared one."""

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from harness.processes import free_port


def postgres_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def as_postgres(args):
    """Run a PostgreSQL binary as the postgres user (initdb refuses root)."""
    if os.geteuid() == 0:
        args = ["runuser", "-u", "postgres", "--", *args]
    return subprocess.run(args, check=True, capture_output=True, text=True, timeout=60)


class PrivatePostgres:
    def __init__(self, port=None, initdb=True):
        """A new cluster at `port` (a free one by default); without `initdb`
        the data directory is left for the caller to fill (a standby's
        base backup, harness/replica.py)."""
        self.bin = postgres_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="croniq-pg-"))
        self.data = self.dir / "data"
        self.port = port or free_port()
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        if initdb:
            as_postgres(
                [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
            )

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def start(self):
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        as_postgres(
            [str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", "start",
             "-l", str(self.dir / "server.log")]
        )  # fmt: skip

    def stop(self):
        as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"])

    def destroy(self):
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait_ready(self, timeout=30):
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url.replace("postgres://", "postgresql://")).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
