"""Objects that live as long as the process, kept out of the collector's sight.

A full garbage collection scans every tracked object, and a Django process
holds a few hundred thousand from start-up (the framework, the apps, their
modules and URL patterns): 40 to 50 ms each time, during which no other
thread of the process runs. In the loop that landed inside a tick
(bench/notifications.py --steps); in a web process, inside the hub's step
that hands a burst to its waiting polls (45 ms added to a 60 ms step, one
step in four). Frozen, a full collection scans only what came since.
"""

import gc
import sys

# How often a long-lived Croniq process (web, loop, notifier) switches
# threads; Python's default is 5 ms. Each caller says why it needs it.
SWITCH_INTERVAL = 0.0005


def settle_the_collector() -> None:
    """Collect what is garbage now, then freeze what is left: call it once
    what is alive will live as long as the process."""
    gc.collect()
    gc.freeze()


def switch_threads_often() -> None:
    sys.setswitchinterval(SWITCH_INTERVAL)
