import hashlib
import secrets
from collections.abc import Iterable

from django.db import models

TOKEN_PREFIX = "crq_"

# Assignment fields a job may need its runner's agent to act on
# (docs/design.md §4): an agent that ignores one would run the job wrong (as
# its own user, without its input, an http or container job's empty command
# instead of its request or image, or a limited job unlimited), so it gets
# such work only when it announced the feature at registration. An agent
# announces `container` only when a container engine answered it
# (docs/design.md §15).
JOB_FEATURES = ("stdin", "run_as", "http", "container", "limits")
# A feature as a label in the sets claims match (`Runner.fits`,
# `Job.requirements`): no label holds a NUL character (the API, apply and
# the admin refuse it), so a mark never meets a real label.
FEATURE_MARK = "\x00feature:"


def feature_marks(features: Iterable[str]) -> frozenset[str]:
    return frozenset(FEATURE_MARK + feature for feature in features)


def split_requirements(requirements: Iterable[str]) -> tuple[list[str], list[str]]:
    """(labels, features) of a requirement or fit set, each sorted."""
    labels, features = [], []
    for item in requirements:
        if item.startswith(FEATURE_MARK):
            features.append(item.removeprefix(FEATURE_MARK))
        else:
            labels.append(item)
    return sorted(labels), sorted(features)


def hash_secret(secret):
    # Tokens are 256-bit random strings, so a fast hash is enough: there is
    # nothing to brute-force that a slow KDF would protect.
    return hashlib.sha256(secret.encode()).hexdigest()


class RunnerTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)

    def authenticate(self, secret):
        """The active token for `secret`, or None."""
        secret_hash = RunnerToken.hash_of(secret)
        if secret_hash is None:
            return None
        return self.active().filter(secret_hash=secret_hash).first()


class RunnerToken(models.Model):
    """A credential runners present as `Authorization: Bearer <secret>`."""

    name = models.CharField(max_length=100, unique=True)
    secret_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = RunnerTokenQuerySet.as_manager()

    class Meta:
        permissions = [("revoke_runnertoken", "Can revoke a runner token")]

    def __str__(self):
        return self.name

    @staticmethod
    def hash_of(secret):
        """The stored hash of a well-formed `secret`; None for anything else."""
        if not secret or not secret.startswith(TOKEN_PREFIX):
            return None
        return hash_secret(secret)

    @classmethod
    def issue(cls, name):
        """Create a token; returns (token, secret). The secret is not stored."""
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(name=name, secret_hash=hash_secret(secret))
        return token, secret


class Runner(models.Model):
    """A machine that pulls work. `name` is its identity across restarts."""

    ONLINE = "online"
    OFFLINE = "offline"
    DRAINING = "draining"
    STATES = [(ONLINE, "online"), (OFFLINE, "offline"), (DRAINING, "draining")]

    name = models.CharField(max_length=200, unique=True)
    token = models.ForeignKey(
        RunnerToken,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runners",
        help_text="The token that first registered this name; only it may use the name.",
    )
    labels = models.JSONField(default=list, blank=True)
    version = models.CharField(max_length=50, blank=True)
    hostname = models.CharField(max_length=255, blank=True)
    capacity = models.PositiveIntegerField(default=1)
    features = models.JSONField(
        default=list,
        db_default=[],
        blank=True,
        help_text="What its agent announced it understands (stdin, run_as): work "
        "needing more waits for another runner.",
    )
    session = models.CharField(max_length=64, help_text="Current process session.")
    state = models.CharField(max_length=10, choices=STATES, default=ONLINE)
    drained = models.BooleanField(
        default=False,
        help_text=(
            "An operator drained it: no new work until resumed or the runner starts afresh"
            " (a new session). Kept while it is offline."
        ),
    )
    registered_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    takeover_count = models.PositiveIntegerField(default=0)
    flapping = models.BooleanField(default=False)
    flapping_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        # Drain covers its inverse (resume); forget releases work and the binding.
        permissions = [
            ("drain_runner", "Can drain and resume a runner"),
            ("forget_runner", "Can forget a runner"),
        ]
        indexes = [
            # The reaper marks runners offline by last_seen_at.
            models.Index(fields=["state", "last_seen_at"], name="runner_state_seen"),
        ]

    def __str__(self):
        return self.name

    @property
    def is_drained(self):
        """It gets no new work: its state says so while it is online, and
        `drained` remembers the drain while it is offline."""
        return self.drained or self.state == self.DRAINING

    @property
    def drainable(self) -> bool:
        """Whether a drain is offered for it: it is not drained and not
        offline. An offline runner takes no work, and the usual way back,
        a new session, ends a drain anyway."""
        return not self.is_drained and self.state != self.OFFLINE

    @property
    def fits(self) -> frozenset[str]:
        """Its labels and the marks of its agent's features: it may take
        work whose `Job.requirements` are all among them."""
        known = [f for f in self.features or () if f in JOB_FEATURES]
        return frozenset(self.labels or ()) | feature_marks(known)

    @property
    def state_when_back(self):
        """The state of a runner heard from again after an offline spell."""
        return self.DRAINING if self.drained else self.ONLINE
