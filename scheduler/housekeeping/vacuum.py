"""Whether PostgreSQL cleans up after Croniq.

Every claim, heartbeat and finish updates an execution, a job or a runner
row, thousands of times a minute at the top of the band; without
autovacuum the dead row versions pile up in the tables and their indexes,
and each claim reads through more of them (bench/top_of_band.py: 4,500
dead index entries per claim after five minutes, the dispatch p99 from
under half a second to several). The loop says so once at start.
"""

import logging

from django.db import connection

from core import db

log = logging.getLogger("croniq.scheduler")

WARNING = (
    "PostgreSQL's autovacuum is off: the execution, job and runner tables "
    "grow dead rows with every claim and finish, and claims slow down within "
    "minutes. Turn autovacuum on, or VACUUM this database every minute or so."
)


def autovacuum_off() -> bool:
    """True when the database is PostgreSQL and its autovacuum is off."""
    if not db.on_postgres():  # by design: only PostgreSQL has an autovacuum
        return False
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        return cursor.fetchone()[0] != "on"


def warn_if_autovacuum_off() -> bool:
    if autovacuum_off():
        log.warning(WARNING)
        return True
    return False
