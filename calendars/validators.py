import zoneinfo

from django.core.exceptions import ValidationError


def validate_timezone(value):
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            f"{value!r} is not a known IANA timezone (for example Europe/Berlin or UTC)."
        ) from None
