"""Named cases for calendars/rules.py: pure, no database, fixed instants."""

from datetime import UTC, date, datetime, time, timedelta

import pytest

from calendars.periods import Period
from calendars.rules import CalendarRules, RulesError, get_zone, month_grid

BERLIN = get_zone("Europe/Berlin")
WORKDAYS = ("mon", "tue", "wed", "thu", "fri")
FREEZE = Period(date(2026, 12, 21), date(2027, 1, 10), "Christmas freeze")


def local(zone, *args):
    """An aware instant from local wall-clock fields (first occurrence when ambiguous)."""
    return datetime(*args, tzinfo=get_zone(zone) if isinstance(zone, str) else zone)


def berlin(*args):
    return local(BERLIN, *args)


def de_by_workdays(**extra):
    return CalendarRules(
        timezone="Europe/Berlin",
        weekdays=WORKDAYS,
        holiday_country="DE",
        holiday_subdivision="BY",
        name="de-by-workdays",
        **extra,
    )


# --- blackouts -----------------------------------------------------------------


def test_it_advances_past_christmas_block():
    rules = de_by_workdays(exclude=(FREEZE,))
    # 11 Jan 2027 is the Monday after the freeze.
    assert rules.next_allowed(berlin(2026, 12, 21, 9, 0)) == berlin(2027, 1, 11, 0, 0)


def test_christmas_block_is_allowed_right_up_to_local_midnight():
    rules = CalendarRules(timezone="Europe/Berlin", exclude=(FREEZE,))
    assert rules.is_allowed(berlin(2026, 12, 20, 23, 59))
    assert not rules.is_allowed(berlin(2026, 12, 21, 0, 0))
    assert rules.allowed_until(berlin(2026, 12, 20, 12, 0)) == berlin(2026, 12, 21, 0, 0)


def test_date_period_end_is_inclusive():
    rules = CalendarRules(
        timezone="Europe/Berlin", exclude=(Period(date(2026, 12, 24), date(2026, 12, 26)),)
    )
    assert not rules.is_allowed(berlin(2026, 12, 26, 23, 59))
    assert rules.is_allowed(berlin(2026, 12, 27, 0, 0))


def test_instant_period_end_is_exclusive():
    start = datetime(2026, 5, 4, 10, 0, tzinfo=UTC)
    rules = CalendarRules(exclude=(Period(start, start + timedelta(hours=2), "deploy"),))
    assert not rules.is_allowed(start + timedelta(minutes=119))
    assert rules.next_allowed(start) == start + timedelta(hours=2)


def test_overlapping_blackouts_are_crossed_in_one_search():
    rules = CalendarRules(
        exclude=(
            Period(date(2026, 1, 1), date(2026, 3, 31), "q1"),
            Period(date(2026, 3, 15), date(2026, 8, 1), "spring"),
            Period(date(2026, 8, 2), date(2027, 2, 1), "rest"),  # adjacent, no gap
        )
    )
    assert rules.next_allowed(datetime(2026, 2, 1, tzinfo=UTC)) == datetime(2027, 2, 2, tzinfo=UTC)


def test_a_calendar_allowing_a_single_day_per_year():
    rules = CalendarRules(
        timezone="America/New_York",
        include=tuple(
            Period(date(y, 3, 15), date(y, 3, 15), "audit day") for y in range(2026, 2032)
        ),
    )
    ny = get_zone("America/New_York")
    assert rules.next_allowed(local(ny, 2027, 3, 16, 0, 0)) == local(ny, 2028, 3, 15, 0, 0)
    assert rules.allowed_until(local(ny, 2028, 3, 15, 10, 0)) == local(ny, 2028, 3, 16, 0, 0)
    assert rules.day_status(date(2028, 3, 14)) == (False, "outside include periods")


def test_next_allowed_is_none_when_nothing_is_allowed_within_the_horizon():
    rules = CalendarRules(include=(Period(date(2020, 1, 1), date(2020, 12, 31)),))
    assert rules.next_allowed(datetime(2026, 1, 1, tzinfo=UTC)) is None
    assert CalendarRules(weekdays=()).next_allowed(datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_horizon_limits_the_search():
    rules = CalendarRules(exclude=(Period(date(2026, 1, 1), date(2026, 6, 30)),))
    t = datetime(2026, 1, 1, tzinfo=UTC)
    assert rules.next_allowed(t, horizon=timedelta(days=100)) is None
    assert rules.next_allowed(t, horizon=datetime(2026, 7, 1, tzinfo=UTC)) == datetime(
        2026, 7, 1, tzinfo=UTC
    )


# --- holidays --------------------------------------------------------------------


def test_bavarian_corpus_christi_is_blocked_but_not_in_berlin():
    corpus_christi = berlin(2026, 6, 4, 12, 0)
    assert not de_by_workdays().is_allowed(corpus_christi)
    berlin_state = CalendarRules(
        timezone="Europe/Berlin", holiday_country="DE", holiday_subdivision="BE"
    )
    assert berlin_state.is_allowed(corpus_christi)
    assert de_by_workdays().day_status(date(2026, 6, 4)) == (False, "Corpus Christi")


def test_us_holidays_block_thanksgiving_and_the_observed_fourth_of_july():
    rules = CalendarRules(timezone="America/New_York", weekdays=WORKDAYS, holiday_country="US")
    ny = get_zone("America/New_York")
    assert rules.day_status(date(2026, 11, 26)) == (False, "Thanksgiving Day")
    assert rules.day_status(date(2026, 7, 3)) == (False, "Independence Day (observed)")
    assert rules.next_allowed(local(ny, 2026, 7, 3, 9, 0)) == local(ny, 2026, 7, 6, 0, 0)


def test_gb_boxing_day_observed_moves_the_next_allowed_day():
    rules = CalendarRules(timezone="Europe/London", weekdays=WORKDAYS, holiday_country="GB")
    london = get_zone("Europe/London")
    # 25 Dec 2026 is a Friday; Boxing Day is observed on Monday 28 Dec.
    assert rules.next_allowed(local(london, 2026, 12, 24, 18, 0)) == local(
        london, 2026, 12, 24, 18, 0
    )
    assert rules.next_allowed(local(london, 2026, 12, 25, 0, 0)) == local(
        london, 2026, 12, 29, 0, 0
    )
    assert rules.day_status(date(2026, 12, 28)) == (False, "Boxing Day (observed)")


# --- daily windows -----------------------------------------------------------------


def test_window_end_is_exclusive_and_jumps_to_next_start():
    rules = CalendarRules(timezone="Europe/Berlin", window_start=time(6, 0), window_end=time(22, 0))
    assert rules.is_allowed(berlin(2026, 5, 4, 21, 59))
    assert not rules.is_allowed(berlin(2026, 5, 4, 22, 0))
    assert rules.next_allowed(berlin(2026, 5, 4, 22, 0)) == berlin(2026, 5, 5, 6, 0)
    assert rules.next_allowed(berlin(2026, 5, 5, 3, 0)) == berlin(2026, 5, 5, 6, 0)
    assert rules.allowed_until(berlin(2026, 5, 4, 8, 0)) == berlin(2026, 5, 4, 22, 0)


def test_window_crossing_midnight_allows_evening_and_early_morning():
    rules = CalendarRules(timezone="Europe/Berlin", window_start=time(22, 0), window_end=time(6, 0))
    assert rules.is_allowed(berlin(2026, 5, 4, 23, 0))
    assert rules.is_allowed(berlin(2026, 5, 5, 5, 59))
    assert rules.next_allowed(berlin(2026, 5, 5, 6, 0)) == berlin(2026, 5, 5, 22, 0)
    # The stretch runs through midnight: both halves touch.
    assert rules.allowed_until(berlin(2026, 5, 4, 23, 0)) == berlin(2026, 5, 5, 6, 0)


def test_window_starting_in_the_spring_gap_opens_when_the_gap_ends():
    rules = CalendarRules(timezone="Europe/Berlin", window_start=time(2, 30), window_end=time(5, 0))
    # 29 Mar 2026: 02:00 CET jumps to 03:00 CEST.
    assert rules.next_allowed(berlin(2026, 3, 29, 1, 0)) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_window_inside_the_repeated_hour_opens_twice_on_fall_back():
    rules = CalendarRules(timezone="Europe/Berlin", window_start=time(2, 0), window_end=time(2, 30))
    first_pass_after_window = datetime(2026, 10, 25, 0, 45, tzinfo=UTC)  # 02:45 CEST
    second_pass_start = datetime(2026, 10, 25, 1, 0, tzinfo=UTC)  # 02:00 CET
    assert not rules.is_allowed(first_pass_after_window)
    assert rules.next_allowed(first_pass_after_window) == second_pass_start
    assert rules.allowed_until(second_pass_start) == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


def test_day_whose_midnight_does_not_exist_starts_when_the_gap_ends():
    # Cuba springs forward at midnight: 8 Mar 2026 begins at 01:00.
    rules = CalendarRules(timezone="America/Havana", weekdays=("sun",))
    havana = get_zone("America/Havana")
    assert rules.next_allowed(local(havana, 2026, 3, 7, 12, 0)) == local(havana, 2026, 3, 8, 1, 0)


def test_sydney_day_boundaries_follow_local_midnight_across_dst():
    rules = CalendarRules(timezone="Australia/Sydney", weekdays=("sun",))
    sydney = get_zone("Australia/Sydney")
    # 4 Oct 2026: DST starts at 02:00; Sunday still starts at local midnight (AEST).
    assert rules.next_allowed(local(sydney, 2026, 10, 3, 12, 0)) == datetime(
        2026, 10, 3, 14, 0, tzinfo=UTC
    )
    assert rules.allowed_until(local(sydney, 2026, 10, 4, 12, 0)) == datetime(
        2026, 10, 4, 13, 0, tzinfo=UTC
    )


# --- base calendars ------------------------------------------------------------------


def test_base_calendar_must_allow_too():
    base = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, name="workdays")
    child = CalendarRules(
        timezone="Europe/Berlin", window_start=time(9), window_end=time(17), base=base
    )
    assert not child.is_allowed(berlin(2026, 5, 9, 10, 0))  # Saturday
    assert child.next_allowed(berlin(2026, 5, 8, 17, 0)) == berlin(2026, 5, 11, 9, 0)
    assert child.day_status(date(2026, 5, 9)) == (False, "weekend (base calendar workdays)")


def test_base_calendar_in_another_timezone_is_read_in_its_own_timezone():
    base = CalendarRules(timezone="America/New_York", window_start=time(9), window_end=time(17))
    child = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, base=base)
    # Mon 4 May 2026 09:00 New York is 15:00 Berlin.
    assert child.next_allowed(berlin(2026, 5, 4, 0, 0)) == berlin(2026, 5, 4, 15, 0)


# --- admin views -----------------------------------------------------------------------


def test_day_status_says_why_a_day_is_blocked():
    rules = de_by_workdays(exclude=(FREEZE,))
    assert rules.day_status(date(2026, 12, 19)) == (False, "weekend")
    assert rules.day_status(date(2026, 12, 22)) == (False, "Christmas freeze")
    assert rules.day_status(date(2026, 12, 18)) == (True, "")
    tuesdays_only = CalendarRules(weekdays=("tue",))
    assert tuesdays_only.day_status(date(2026, 12, 21)) == (False, "not an allowed weekday")


def test_allowed_days_are_the_days_any_instant_of_which_is_allowed():
    # January 2027 in Bavaria: Fri 1 and Wed 6 are holidays.
    assert de_by_workdays().allowed_days(2027, 1)[:3] == [
        date(2027, 1, 4),
        date(2027, 1, 5),
        date(2027, 1, 7),
    ]
    # The freeze runs to Sun 10 January.
    assert de_by_workdays(exclude=(FREEZE,)).allowed_days(2027, 1)[:2] == [
        date(2027, 1, 11),
        date(2027, 1, 12),
    ]
    # Blocked until noon: the afternoon is allowed, so the day counts.
    noon = de_by_workdays(exclude=(Period(berlin(2027, 1, 4, 0, 0), berlin(2027, 1, 4, 12, 0)),))
    assert noon.day_allowed(date(2027, 1, 4))
    # A 05:00-06:00 window, and a blackout over that hour: nothing is left.
    early = de_by_workdays(
        window_start=time(5),
        window_end=time(6),
        exclude=(Period(berlin(2027, 1, 4, 5, 0), berlin(2027, 1, 5, 0, 0)),),
    )
    assert not early.day_allowed(date(2027, 1, 4))
    assert early.day_allowed(date(2027, 1, 5))
    # The base calendar's holidays count too.
    on_workdays = CalendarRules(timezone="Europe/Berlin", base=de_by_workdays())
    assert not on_workdays.day_allowed(date(2027, 1, 6))
    assert on_workdays.day_allowed(date(2027, 1, 7))
    weekends = CalendarRules(timezone="Europe/Berlin", weekdays=("sat", "sun"))
    assert weekends.allowed_days(2027, 2) == [
        date(2027, 2, day) for day in (6, 7, 13, 14, 20, 21, 27, 28)
    ]


def test_month_grid_covers_three_months_in_weeks():
    grid = month_grid(de_by_workdays(exclude=(FREEZE,)), date(2026, 12, 5), months=3)
    assert [m["title"] for m in grid] == ["December 2026", "January 2027", "February 2027"]
    assert all(len(week) == 7 for month in grid for week in month["weeks"])
    cells = {c["date"]: c for m in grid for w in m["weeks"] for c in w if c}
    assert cells[date(2026, 12, 25)]["reason"] == "Christmas Day"  # holiday named first
    assert cells[date(2027, 1, 11)]["allowed"] is True


def test_allowed_stretches_lists_the_next_allowed_time():
    rules = de_by_workdays(window_start=time(6), window_end=time(22), exclude=(FREEZE,))
    stretches = rules.allowed_stretches(berlin(2026, 12, 18, 12, 0), 3)
    assert stretches == [
        (berlin(2026, 12, 18, 12, 0), berlin(2026, 12, 18, 22, 0)),
        (berlin(2027, 1, 11, 6, 0), berlin(2027, 1, 11, 22, 0)),
        (berlin(2027, 1, 12, 6, 0), berlin(2027, 1, 12, 22, 0)),
    ]


# --- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"timezone": "Europe/Berlinn"}, "'Europe/Berlinn' is not a known IANA timezone"),
        ({"holiday_country": "XX"}, "'XX' is not a holiday country"),
        ({"holiday_country": "DE", "holiday_subdivision": "ZZ"}, "'ZZ' is not a subdivision of DE"),
        ({"holiday_subdivision": "BY"}, "a holiday subdivision needs a country"),
        ({"weekdays": ("mon", "funday")}, "'funday' is not a weekday"),
        ({"window_start": time(9), "window_end": time(9)}, "daily window starts and ends at 09:00"),
        ({"window_start": time(9)}, "needs both a start and an end"),
    ],
)
def test_bad_calendar_data_is_refused_with_a_clear_message(kwargs, message):
    with pytest.raises(RulesError, match=message):
        CalendarRules(**kwargs)


def test_period_starting_after_it_ends_is_refused():
    with pytest.raises(RulesError, match=r"period 'freeze' starts \(2027-01-06\) after it ends"):
        Period(date(2027, 1, 6), date(2026, 12, 24), "freeze")
    t = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(RulesError, match="starts"):
        Period(t, t)


def test_naive_instants_are_refused():
    with pytest.raises(RulesError, match="has no timezone"):
        CalendarRules().is_allowed(datetime(2026, 1, 1))


def test_block_reason_says_why_an_instant_is_blocked():
    rules = de_by_workdays(exclude=(FREEZE,), window_start=time(8), window_end=time(18))
    assert rules.block_reason(berlin(2026, 12, 19, 10, 0)) == "weekend"
    assert rules.block_reason(berlin(2026, 12, 22, 10, 0)) == "Christmas freeze"
    assert rules.block_reason(berlin(2026, 6, 4, 10, 0)) == "Corpus Christi"  # in Bavaria
    # A day the calendar allows, at an hour its window does not.
    assert rules.block_reason(berlin(2026, 12, 18, 19, 0)) == "outside the daily window 08:00-18:00"
    assert rules.block_reason(berlin(2026, 12, 18, 10, 0)) == ""


def test_block_reason_names_the_base_calendar_that_blocks():
    base = CalendarRules(timezone="Europe/Berlin", weekdays=WORKDAYS, name="workdays")
    child = CalendarRules(timezone="Europe/Berlin", base=base)
    assert child.block_reason(berlin(2026, 5, 9, 10, 0)) == "weekend (base calendar workdays)"
    assert child.block_reason(berlin(2026, 5, 8, 10, 0)) == ""
