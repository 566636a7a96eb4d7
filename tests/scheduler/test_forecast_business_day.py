"""The capacity forecast of an `@business_day` job on a calendar: its
instants are the loop's own (scheduler.jobs.cron), though the forecast hands the
schedule its calendar cut at the end of the window."""

import datetime as dt

from calendars.rules import CalendarRules
from scheduler.forecast import schedule_fires
from scheduler.jobs.cron import SKIP, next_fires

AFTER = dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.UTC)
UNTIL = dt.datetime(2027, 3, 1, 0, 0, tzinfo=dt.UTC)
OFFICE = CalendarRules(
    timezone="Europe/Berlin",
    weekdays=["mon", "tue", "wed", "thu", "fri"],
    holiday_country="DE",
    holiday_subdivision="BY",
    window_start=dt.time(8, 0),
    window_end=dt.time(18, 0),
)


def test_a_business_day_job_on_a_calendar_fires_where_the_loop_fires_it():
    fires = schedule_fires("@business_day 3 09:00", "Europe/Berlin", OFFICE, SKIP, UNTIL)

    found = list(fires(AFTER))

    loop = next_fires("@business_day 3 09:00", "Europe/Berlin", OFFICE, AFTER, 3, SKIP)
    assert found == loop
    # January: the 1st (New Year) and the 6th (Epiphany, in Bavaria) do not
    # count, so the 4th, 5th and 7th are its first three business days.
    assert found[1] == dt.datetime(2027, 1, 7, 8, 0, tzinfo=dt.UTC)
