"""The refusal of an operator action: raised by scheduler.operations,
scheduler.triggers and scheduler.backfill, and answered by the admin, the
dashboard and the management API."""


class OperationRefused(Exception):
    pass
