"""The notifier in a process of its own, beside the scheduler loop.

Delivery is Python work (HTTP, JSON, the ORM) in up to
CRONIQ_NOTIFY_WORKERS threads. In the loop's own process those threads
share one interpreter lock with the tick: a burst of 1,000 notifications
stretched the tick's p99 from 53 ms to 958 ms (bench/notifications.py,
PostgreSQL). In a child process they cannot touch it.

The loop's "notifier" step starts the child; it stops with the loop, and
dies with the loop's process however that ends (the kernel kills it when its
parent dies, and it checks its parent besides). Claims under a lease
(`notifications.delivery`) make a child killed mid-delivery lose nothing.
"""

import ctypes
import logging
import multiprocessing
import os
import signal
import threading

from django.conf import settings
from django.db import connection

from scheduler.firing.long_lived import switch_threads_often
from scheduler.firing.steps import HOUSEKEEPING_INTERVAL, Step

log = logging.getLogger("croniq.notifications")

PR_SET_PDEATHSIG = 1
PARENT_CHECK = 0.5
# On PostgreSQL the child runs this much nicer than the loop, so that on a
# busy machine the tick gets the CPU first: during a burst of 1,000
# deliveries it took a core, and the tick's wall time was two to three
# times its CPU time. Not on SQLite: a preempted child holding the
# database's one write lock would hold up the tick's writes instead
# (a 200 ms tick in one run of three, bench/notifications.py).
NICENESS = 10
STOP_TIMEOUT = 10.0


def start(loop_stopping):
    """Start the notifier's process; it is stopped when `loop_stopping` is set.
    Returns the multiprocessing.Process."""
    context = multiprocessing.get_context("spawn")
    database = connection.settings_dict["NAME"]
    process = context.Process(
        target=run, args=(os.getpid(), database), name="croniq-notifier", daemon=True
    )
    process.start()
    stopper = threading.Thread(
        target=stop_with, args=(process, loop_stopping), name="croniq-notifier-stop", daemon=True
    )
    stopper.start()
    log.info("notifier process %s started", process.pid)
    return process


def stop_with(process, loop_stopping):
    while process.is_alive():
        if loop_stopping.wait(PARENT_CHECK):
            process.terminate()  # SIGTERM: it gives back what it has not tried
            process.join(STOP_TIMEOUT)
            if process.is_alive():
                process.kill()
            return


def run(parent_pid, database):
    """The child: Django, the notifier, until a SIGTERM or its parent is gone."""
    die_with_parent()
    if os.getppid() != parent_pid:
        return  # the parent died before the kernel was told
    # Switching threads every 0.5 ms: on SQLite the thread writing delivery
    # records holds the write lock across its statements, taking the
    # interpreter lock back from the delivery threads after each; at
    # Python's 5 ms a switch, the loop's tick waited up to 150 ms for that
    # lock during a burst (bench/notifications.py --only burst --steps).
    switch_threads_often()
    import django
    from django.conf import settings

    django.setup()
    # The parent's database, exactly (a test database has another name than
    # the settings say).
    settings.DATABASES["default"]["NAME"] = database
    from core import db

    if db.on_postgres():
        os.nice(NICENESS)
    from django.urls import get_resolver

    from notifications import notifier

    # Messages link to dashboard pages: load the URL patterns now, not on
    # the first failure (about 0.6 s).
    get_resolver().reverse_dict  # noqa: B018

    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the loop, which stops us
    running = notifier.Notifier(stopping=stopping).start()
    while not stopping.wait(PARENT_CHECK):
        if os.getppid() != parent_pid or not running.alive():
            break
    running.stop()


def die_with_parent():
    """Linux: SIGKILL this process when the thread that started it ends."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # elsewhere the parent check above does it, within PARENT_CHECK


def loop_step(loop):
    """The loop's "notifier" step: starts the notifier's process with the
    loop's first tick (and again if it ever died); it stops with the loop.
    Counts nothing."""
    # Imported here: the child imports this module before Django is set up.
    from notifications import notifier

    started = {}

    def ensure_running(now):
        current = started.get("notifier")
        alive = current is not None and current.is_alive()
        wanted = notifier.AUTOSTART and settings.CRONIQ_NOTIFIER
        if wanted and not alive and not loop.stopping.is_set():
            started["notifier"] = start(loop.stopping)
        return 0

    return Step("notifier", ensure_running, every=HOUSEKEEPING_INTERVAL)
