"""core.instants: every instant a page shows reads "2026-12-05 09:00:00 CET",
ISO order, a 24-hour clock and the zone; Django's own rendering (the admin,
through DATETIME_FORMAT) writes the very same text."""

import datetime as dt
import zoneinfo

import pytest
from django.utils import formats, timezone

from core.instants import shown, shown_time

BERLIN = zoneinfo.ZoneInfo("Europe/Berlin")


def utc(*fields):
    return dt.datetime(*fields, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("instant", "zone", "text"),
    [
        (utc(2026, 12, 5, 8, 0), "UTC", "2026-12-05 08:00:00 UTC"),
        (utc(2026, 12, 5, 8, 0), "Europe/Berlin", "2026-12-05 09:00:00 CET"),
        (utc(2026, 7, 5, 8, 0), "Europe/Berlin", "2026-07-05 10:00:00 CEST"),
        (utc(2026, 12, 5, 16, 5, 7), "America/New_York", "2026-12-05 11:05:07 EST"),
        # The afternoon on a 24-hour clock, never "04:05:57 PM".
        (utc(2026, 12, 5, 16, 5, 57), "UTC", "2026-12-05 16:05:57 UTC"),
        # Midnight is 00, never 12 or 24; the date is the viewer's next day.
        (utc(2026, 12, 5, 15, 0), "Asia/Tokyo", "2026-12-06 00:00:00 JST"),
        # A zone without a letter abbreviation in the tz database.
        (utc(2026, 12, 5, 8, 0), "Europe/Istanbul", "2026-12-05 11:00:00 +03"),
        (utc(2026, 12, 5, 8, 0), "Asia/Kathmandu", "2026-12-05 13:45:00 +0545"),
    ],
)
def test_an_instant_reads_in_iso_order_on_a_24_hour_clock_with_its_zone(instant, zone, text):
    assert shown(instant, zoneinfo.ZoneInfo(zone)) == text


@pytest.mark.parametrize(
    ("instant", "text"),
    [
        # 29 March 2026: Berlin's clocks go from 02:00 CET to 03:00 CEST.
        (utc(2026, 3, 29, 0, 59, 59), "2026-03-29 01:59:59 CET"),
        (utc(2026, 3, 29, 1, 0, 0), "2026-03-29 03:00:00 CEST"),
        # 25 October 2026: from 03:00 CEST back to 02:00 CET; 02:30 twice,
        # told apart by the zone.
        (utc(2026, 10, 25, 0, 30), "2026-10-25 02:30:00 CEST"),
        (utc(2026, 10, 25, 1, 30), "2026-10-25 02:30:00 CET"),
    ],
)
def test_the_zone_tells_the_two_sides_of_a_dst_change_apart(instant, text):
    assert shown(instant, BERLIN) == text


def test_the_default_is_utc_whatever_offset_the_instant_carries():
    plus_two = dt.datetime(2026, 12, 5, 10, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert shown(plus_two) == "2026-12-05 08:00:00 UTC"


def test_the_time_alone_keeps_the_clock_and_the_zone():
    assert shown_time(utc(2026, 12, 5, 8, 0), BERLIN) == "09:00:00 CET"
    assert shown_time(utc(2026, 12, 5, 8, 0)) == "08:00:00 UTC"


def test_a_naive_datetime_is_refused_not_read_on_the_servers_clock():
    with pytest.raises(ValueError, match="no offset"):
        shown(dt.datetime(2026, 12, 5, 8, 0))


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"])
@pytest.mark.parametrize(
    "instant", [utc(2026, 12, 5, 16, 5, 57), utc(2026, 3, 29, 1, 0), utc(2026, 7, 5, 0, 30)]
)
def test_djangos_datetime_format_writes_the_same_text(instant, zone):
    # Not in the hour a DST change repeats: there Django's "T" writes no
    # zone at all (django.utils.dateformat leaves out the zone of a wall
    # time that is ambiguous), where core.instants writes CEST or CET.
    # The admin shows dates through Django's formats in the current timezone
    # (TIME_ZONE): croniq_project/formats must not drift from core.instants.
    with timezone.override(zone):
        django_text = formats.date_format(timezone.localtime(instant), "DATETIME_FORMAT")
    assert django_text == shown(instant, zoneinfo.ZoneInfo(zone))


def test_djangos_date_and_time_formats_are_iso_and_24_hour():
    instant = utc(2026, 12, 5, 16, 5, 57)
    assert formats.date_format(instant.date(), "DATE_FORMAT") == "2026-12-05"
    assert formats.date_format(instant.date(), "SHORT_DATE_FORMAT") == "2026-12-05"
    assert formats.time_format(instant.time(), "TIME_FORMAT") == "16:05:57"
