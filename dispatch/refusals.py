"""The refusals of runner calls: each is answered with its status and
`{"detail": ...}` (mapped once, in `croniq_project.api`) and changes nothing."""


class Refused(Exception):
    """A runner call that is answered with an error status and changes nothing."""

    status = 400

    def __init__(self, detail):
        super().__init__(detail)
        self.detail = detail


class Unauthorized(Refused):
    status = 401


class Forbidden(Refused):
    status = 403


class NotFound(Refused):
    status = 404


class Conflict(Refused):
    """A stale lease or a superseded session (fencing, invariant 3)."""

    status = 409


class TooLarge(Refused):
    status = 413
