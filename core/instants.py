"""How Croniq shows an instant to a person: "2026-12-05 09:00:00 CET".

One rule everywhere a page shows a time: the date in ISO order, a 24-hour
clock and the zone's abbreviation. "12/05/2026, 04:05:57 AM" reads as the
12th of May to most of the world; the year first reads one way only. The
server's text comes from here (the dashboard's tags, the fire times beside a
schedule, the admin through DATETIME_FORMAT in croniq_project/formats), the
pages' scripts from `static/croniq/instants.js`, which builds the same text
in the viewer's timezone.
"""

from datetime import UTC, datetime, tzinfo

# Django's date format (croniq_project/formats) that writes the same text as
# `shown` for the instant in the current timezone.
DJANGO_FORMAT = "Y-m-d H:i:s T"


def shown(instant: datetime, zone: tzinfo = UTC) -> str:
    """`instant` on the clock of `zone`: "2026-12-05 09:00:00 CET"."""
    local = on_clock(instant, zone)
    return f"{local.year:04d}-{local.month:02d}-{local.day:02d} {time_text(local)}"


def shown_time(instant: datetime, zone: tzinfo = UTC) -> str:
    """The clock part alone, "09:00:00 CET": beside a full instant of the
    same day (the fire times' UTC, after their wall time)."""
    return time_text(on_clock(instant, zone))


def on_clock(instant: datetime, zone: tzinfo) -> datetime:
    # A naive datetime has no instant: astimezone() would read it on the
    # server's own clock, which is how a wrong time gets shown as right.
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{instant.isoformat()} has no offset: it is no instant")
    return instant.astimezone(zone)


def time_text(local: datetime) -> str:
    return f"{local.hour:02d}:{local.minute:02d}:{local.second:02d} {local.tzname()}"
