"""The loop's steps, contributed by the apps.

Each app that has periodic work declares it on its AppConfig:

    def loop_steps(self, loop):
        return [Step("reaped", reap_expired_leases)]

`scheduler_loop` runs every step that is due, each isolated from the others
(docs/design.md §1). The scheduler imports nothing from the apps above it: they
hand it their steps (and learn about new work through `scheduler.firing.notifier`).
Apps below the scheduler (audit) cannot import `Step`: a plain
`(name, run, every, until, idle_every)` tuple (or its first fields) is
taken as one.
"""

import typing
from collections.abc import Callable

from django.apps import apps

# How often housekeeping steps run (runner states, retention): they need no
# sub-second precision.
HOUSEKEEPING_INTERVAL = 5.0
# How long a retention pass that found nothing is followed by none (at rest,
# retention every 5 s was half of the loop's housekeeping CPU).
IDLE_PRUNE_EVERY = 60.0


class Step(typing.NamedTuple):
    """One unit of the loop: `run(now)` returns how much it did.

    `name` is its key in the tick's report. `every` is the shortest time
    between two runs, in seconds: 0 runs it on every tick (work whose delay
    users see), a few seconds suits housekeeping. `until`, if given, is
    asked after each run, `until(now)`: the instant before which the step
    cannot have work (a deadline it knows of), or None; the loop skips it
    until then, and runs it again at the next tick after a job is saved.
    `idle_every`, if given, is the shortest time between a run that did
    nothing and the next (retention: a pass that found nothing still costs
    a few queries, and what it looks for is counted in days).
    """

    name: str
    run: Callable
    every: float = 0.0
    until: Callable | None = None
    idle_every: float | None = None


def collect(loop: typing.Any) -> list[Step]:
    """The steps of every installed app, in INSTALLED_APPS order; the steps
    that run on every tick come first, so housekeeping never delays firing."""
    steps = []
    for config in apps.get_app_configs():
        contribute = getattr(config, "loop_steps", None)
        if contribute is not None:
            steps.extend(Step(*step) for step in contribute(loop))
    names = [step.name for step in steps]
    if len(set(names)) != len(names):
        raise ValueError(f"two loop steps share a name: {names}")
    return sorted(steps, key=lambda step: step.every > 0)
