"""The scheduler's models, one import away; each is defined in its room.

Django registers an app's models from this module, so every model module of
the app is imported here.
"""

from scheduler.jobs.job_health import JobHealth
from scheduler.jobs.models import (
    MAX_JITTER,
    MAX_RETRIES,
    MAX_RETRY_BACKOFF,
    MAX_RETRY_DELAY,
    Job,
    default_labels,
    jitter_offset,
    validate_parameters,
)
from scheduler.runs.concurrency_models import ConcurrencyGroup
from scheduler.runs.log_chunks import LOG_TRUNCATED_MARKER, LogChunk
from scheduler.runs.maintenance_models import MaintenanceSwitch, MaintenanceWindow
from scheduler.runs.models import Execution, TriggerKey
from scheduler.triage.dead_letters import DeadLetter

__all__ = [
    "LOG_TRUNCATED_MARKER",
    "MAX_JITTER",
    "MAX_RETRIES",
    "MAX_RETRY_BACKOFF",
    "MAX_RETRY_DELAY",
    "ConcurrencyGroup",
    "DeadLetter",
    "Execution",
    "Job",
    "JobHealth",
    "LogChunk",
    "MaintenanceSwitch",
    "MaintenanceWindow",
    "TriggerKey",
    "default_labels",
    "jitter_offset",
    "validate_parameters",
]
