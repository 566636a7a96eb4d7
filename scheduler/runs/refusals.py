"""The refusal of an operator action: raised by scheduler.runs.operations,
scheduler.firing.triggers and scheduler.firing.backfill, and answered by the admin, the
dashboard and the management API."""


class OperationRefused(Exception):
    pass
