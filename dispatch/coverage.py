"""Which runners can take a job's work and why pending work still waits:
what the dashboard, `manage.py apply` and the job admin tell an operator
(how quiet a runner is: `dispatch.liveness`).

A runner carries a job's labels when its labels include all of them (DESIGN
§4 "Matching"; `dispatch.claims.claimable` applies the same rule in SQL and
`notifications.detectors.RunnerPool` through `carries`). Everything here
reads the runners once (`Coverage.read`) and takes `now` as an argument.
"""

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import NamedTuple

from django.db.models import Count

from runners.models import Runner, split_requirements
from scheduler.models import Execution

# Runners named in a reason, at most.
NAMED = 5


def carries(runner_labels: Iterable[str] | None, labels: Iterable[str] | None) -> bool:
    """Whether a runner with `runner_labels` may take work asking for `labels`
    (either may hold feature marks: `Runner.fits`, `Job.requirements`)."""
    return set(labels or ()) <= set(runner_labels or ())


def online_with(labels: Iterable[str] | None) -> list[str]:
    """Names of the runners online now, and not drained, that carry
    `labels` (a job's `requirements`: its labels and the features it
    needs): those a run-on-all occurrence runs on (`scheduler.firing.fanout`)."""
    online = Runner.objects.filter(state=Runner.ONLINE, drained=False)
    return sorted(
        r.name for r in online.only("name", "labels", "features") if carries(r.fits, labels)
    )


def listed(labels: Iterable[str]) -> str:
    return ", ".join(sorted(labels))


def lacking(missing: Collection[str], one: bool = False) -> tuple[str, str]:
    """How agents that did not announce the `missing` features a job needs
    fall short (a verb phrase the features follow: "do not support") and
    what to do about it; `one`: said of a single agent. An agent announces
    run_as only when its --allow-run-as names a user, so run_as alone
    missing is as likely the operator's choice as an agent that predates
    it; container only when a container engine answered it at start, so
    container alone missing is as likely a machine without docker or
    podman; stdin missing means an older agent."""
    do, their = ("does", "its") if one else ("do", "their")
    allow = f"name the job's user in {their} --allow-run-as"
    engine = "run docker or podman where the agent runs and restart it (croniq-runner --engine)"
    if set(missing) == {"run_as"}:
        return (
            f"{do} not allow (croniq-runner --allow-run-as) or predate",
            f"{allow}, or upgrade croniq-runner",
        )
    if set(missing) == {"container"}:
        return f"{do} not have a container engine or predate", f"{engine}, or upgrade croniq-runner"
    remedies = ["upgrade croniq-runner"]
    if "run_as" in missing:
        remedies.append(allow)
    if "container" in missing:
        remedies.append(engine)
    return f"{do} not support", " and ".join(remedies)


class Waiting(NamedTuple):
    """Why pending work waits: `kind` for styling and tests, `text` for people."""

    kind: str  # unknown, unavailable, not_yet, busy, free
    text: str


class Coverage:
    """A snapshot of the registered runners (`Runner` rows: online, draining
    or offline; forgotten ones are gone) answering label questions."""

    def __init__(self, runners, running=None):
        self.runners = runners
        # {runner id: running executions}, read on first need.
        self._running = running

    @classmethod
    def read(cls) -> "Coverage":
        fields = ("name", "labels", "features", "version", "state", "drained", "capacity")
        return cls(list(Runner.objects.only(*fields)))

    def seen_with(self, labels: Collection[str] | None) -> list[Runner]:
        """The registered runners that carry `labels` (a job's labels, or its
        `requirements` with the features it needs), whatever their state."""
        return [r for r in self.runners if carries(r.fits, labels)]

    def taking_work(self, runners: Iterable[Runner]) -> list[Runner]:
        return [r for r in runners if r.state == Runner.ONLINE and not r.drained]

    def online(self) -> list[Runner]:
        return [r for r in self.runners if r.state != Runner.OFFLINE]

    def running(self) -> dict[int, int]:
        if self._running is None:
            rows = (
                Execution.objects.filter(state=Execution.RUNNING)
                .values_list("runner_id")
                .annotate(n=Count("id"))
                .order_by()
            )
            self._running = dict(rows)
        return self._running

    def never_seen(self, labels: Collection[str] | None) -> str | None:
        """A warning when no registered runner carries `labels` (a job's
        `requirements`: a job without labels or features suits any runner,
        nothing to warn about)."""
        if not labels or self.seen_with(labels):
            return None
        outdated = self.outdated(labels)
        if outdated:
            return outdated
        labels, _ = split_requirements(labels)
        return f"no runner with labels {listed(labels)} has been seen"

    def why_waiting(
        self, labels: Collection[str] | None, run_after: datetime, now: datetime
    ) -> Waiting:
        """Why a pending execution of a job with `labels`, ready from
        `run_after`, has not started."""
        seen = self.seen_with(labels)
        if not seen:
            outdated = self.outdated(labels)
            if outdated:
                return Waiting("unknown", outdated)
            labels, _ = split_requirements(labels or ())
            return Waiting("unknown", f"{self.nobody_carries(labels)}; {self.online_summary()}")
        labels, _ = split_requirements(labels or ())
        ready = self.taking_work(seen)
        if not ready:
            return Waiting("unavailable", self.unavailable(labels, seen))
        if run_after > now:
            return Waiting("not_yet", f"it waits until {run_after:%Y-%m-%d %H:%M:%S} UTC")
        used = sum(self.running().get(r.pk, 0) for r in ready)
        slots = sum(r.capacity for r in ready)
        who = f"the {plural(len(ready), 'runner')} {with_labels(labels)}"
        one = len(ready) == 1
        if used >= slots:
            return Waiting(
                "busy", f"{who} {'is' if one else 'are'} busy: {used} of {slots} slots in use"
            )
        free = slots - used
        return Waiting(
            "free",
            f"{who} {'has' if one else 'have'} {plural(free, 'free slot')};"
            " it starts at the next poll",
        )

    def outdated(self, requirements: Collection[str] | None) -> str | None:
        """Why no runner fits `requirements` when some carry their labels but
        did not announce a feature the job needs (an older agent, or for
        run_as one whose --allow-run-as names no user), or None."""
        labels, features = split_requirements(requirements or ())
        if not features:
            return None
        seen = self.seen_with(labels)
        if not seen:
            return None
        # Called when none fits: each of them lacks one at least.
        missing = set().union(*(set(features) - set(r.features or ()) for r in seen))
        falls_short, remedy = lacking(missing)
        named = ", ".join(f"{r.name} ({r.version or 'version unknown'})" for r in seen[:NAMED])
        more = f" and {len(seen) - NAMED} more" if len(seen) > NAMED else ""
        return (
            f"the job needs {listed(missing)}, which the agents of the runners "
            f"{with_labels(labels)} {falls_short}: {named}{more}; {remedy}"
        )

    def nobody_carries(self, labels: Collection[str] | None) -> str:
        if labels:
            return f"no runner with labels {listed(labels)} has been seen"
        return "no runner has registered yet"

    def online_summary(self) -> str:
        online = self.online()
        if not online:
            return "no runner is online"
        carried = set().union(*(r.labels or () for r in online))
        kinds = listed(carried) if carried else "none has labels"
        return f"{plural(len(online), 'runner')} online: {kinds}"

    def unavailable(self, labels: Collection[str] | None, seen: list[Runner]) -> str:
        states = [f"{r.name} {'draining' if r.drained else r.state}" for r in seen[:NAMED]]
        more = f" and {len(seen) - NAMED} more" if len(seen) > NAMED else ""
        return (
            f"the runners {with_labels(labels)} are offline or draining: {', '.join(states)}{more}"
        )


def with_labels(labels: Collection[str] | None) -> str:
    return f"with labels {listed(labels)}" if labels else "online"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def label_warnings(
    jobs: Iterable[tuple[str, list[str]]], coverage: Coverage | None = None
) -> list[str]:
    """["job X: ..."] for each job whose labels no registered runner carries."""
    coverage = coverage or Coverage.read()
    found = []
    for name, labels in jobs:
        problem = coverage.never_seen(labels)
        if problem:
            found.append(f"job {name}: {problem}; its runs wait until one registers")
    return found
