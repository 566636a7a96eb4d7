"""Property tests of the Quartz day forms and the H forms against a minute-walking oracle.

As in test_cron_properties.py, the oracle walks UTC minute by minute and
applies the Debian DST rule with zoneinfo's own fold resolution. Here it
also reads the day fields' text itself ("L", "LW", "15W", "5L", "1#2") with
date arithmetic of its own, sharing no code with scheduler/jobs/cron.py. The
instants sit just before month ends, month starts and the DST changes of
the zones (Berlin's are last Sundays, New York's a second and a first one),
and the forms are drawn near the days the walk crosses, so they do fire.

CRONIQ_CRON_EXAMPLES sets the examples per form (default: a fast CI run);
`CRONIQ_CRON_EXAMPLES=10000` is the thorough run.
"""

import os
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.jobs.cron import next_fire, parse_schedule
from tests.calendars.strategies import DST_CHANGES, calendars, oracle_allowed

EXAMPLES = int(os.environ.get("CRONIQ_CRON_EXAMPLES", "40"))
FORM_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ZONES = ["Europe/Berlin", "America/New_York", "Australia/Sydney", "America/Havana"]
MONTH_STARTS = [
    datetime(2026, 3, 1, tzinfo=UTC),
    datetime(2026, 4, 1, tzinfo=UTC),
    datetime(2026, 5, 1, tzinfo=UTC),
    datetime(2026, 11, 1, tzinfo=UTC),
    datetime(2027, 1, 1, tzinfo=UTC),
    datetime(2028, 2, 1, tzinfo=UTC),
    datetime(2028, 3, 1, tzinfo=UTC),
]
ONE_MINUTE = timedelta(minutes=1)
WALK = timedelta(days=3)
NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

# Minute and hour fields: plain, with the hours where DST changes happen drawn often.
minute_field = st.sampled_from(["0", "30", "59", "0,30", "*/20", "15-17", "*"])
hour_field = st.sampled_from(["1", "2", "3", "0", "23", "2,3", "1-3", "9", "*/6", "*"])
month_field = st.sampled_from(["*", "*", "*", "*", "2,3", "10-12", "1-6"])


@st.composite
def instants(draw, tz):
    """Just before a month start or a DST change of the zone, in UTC."""
    if draw(st.booleans()):
        base = draw(st.sampled_from(DST_CHANGES[tz]))
        return base - timedelta(minutes=draw(st.integers(-12 * 60, 2 * 24 * 60)))
    base = draw(st.sampled_from(MONTH_STARTS))
    return base - timedelta(minutes=draw(st.integers(-24 * 60, 10 * 24 * 60)))


def walked_days(zone, after):
    """The local dates a walk from `after` touches."""
    first = after.astimezone(zone).date()
    return [first + timedelta(days=k) for k in range(-1, 5)]


@st.composite
def month_day_items(draw, days, kind):
    """L, LW or nW (n near the walked days, sometimes anywhere)."""
    if kind != "W":
        return kind
    near = min(max(draw(st.sampled_from(days)).day + draw(st.integers(-2, 2)), 1), 31)
    return f"{draw(st.one_of(st.just(near), st.integers(1, 31)))}W"


def cron_weekday(day):
    return day.isoweekday() % 7


@st.composite
def weekday_items(draw, days, kind):
    """wL or w#n, w and n mostly those of a walked day or its month's last
    day (so a walk a week before it sees the same weekday); names and 7 for Sunday too."""
    day = draw(st.sampled_from([*days, *(last_of_month(d) for d in days)]))
    weekday = draw(st.one_of(st.just(cron_weekday(day)), st.integers(0, 6)))
    if weekday == 0 and draw(st.booleans()):
        weekday = 7
    written = NAMES[weekday % 7] if draw(st.integers(0, 4)) == 0 else str(weekday)
    if kind == "5L":
        return f"{written}L"
    n = draw(st.one_of(st.just((day.day + 6) // 7), st.integers(1, 5)))
    return f"{written}#{n}"


@st.composite
def day_fields(draw, form, days):
    """(day-of-month, day-of-week) exercising `form`, now and then beside other items.

    A restricted other field makes cron OR the two (Vixie), so that is drawn too.
    """
    plain_dom = st.integers(1, 31).map(str)
    plain_dow = st.integers(0, 7).map(str)
    if form in ("L", "LW", "W"):
        others = st.one_of(plain_dom, *(month_day_items(days, k) for k in ("L", "LW", "W")))
        items = [draw(month_day_items(days, form)), *draw(st.lists(others, max_size=2))]
        dow = draw(
            st.sampled_from(["*", "*", "?", "1-5", "5", "0,6", "5L", "1#1", "5-0", "sat-sun"])
        )
        return ",".join(items), dow
    others = st.one_of(plain_dow, weekday_items(days, "5L"), weekday_items(days, "1#2"))
    items = [draw(weekday_items(days, form)), *draw(st.lists(others, max_size=2))]
    dom = draw(st.sampled_from(["*", "*", "?", "1", "15", "L", "LW", "1W"]))
    return dom, ",".join(items)


@st.composite
def form_cases(draw, form):
    tz = draw(st.sampled_from(ZONES))
    zone = ZoneInfo(tz)
    after = draw(instants(tz))
    if draw(st.booleans()):
        after += timedelta(seconds=draw(st.integers(1, 59)))
    dom, dow = draw(day_fields(form, walked_days(zone, after)))
    text = " ".join([draw(minute_field), draw(hour_field), dom, draw(month_field), dow])
    calendar = None
    if draw(st.booleans()):
        calendar = draw(
            calendars(after.replace(second=0), timezone=draw(st.sampled_from([tz, None])))
        )
    return text, zone, calendar, after, draw(st.sampled_from(["skip", "defer"]))


hashed_minutes = st.sampled_from(["H", "H(0-29)", "H(30-59)", "H/15", "H(10-50)/7", "H/20,H(0-9)"])
hashed_hours = st.sampled_from(["H", "H(1-3)", "H(0-2)", "H/6", "H(1-3)/2", "2", "1-3", "*"])
keys = st.one_of(st.text(min_size=1, max_size=20), st.integers(0, 999).map(lambda n: f"job-{n}"))


@st.composite
def hashed_cases(draw):
    tz = draw(st.sampled_from(ZONES))
    after = draw(instants(tz))
    dom = draw(st.sampled_from(["*", "*", "*", "L", "1", "15W"]))
    dow = draw(st.sampled_from(["*", "*", "*", "0", "0L", "0#2", "1-5", "mon-0"]))
    fields = [draw(hashed_minutes), draw(hashed_hours), dom, draw(month_field), dow]
    calendar = None
    if draw(st.booleans()):
        calendar = draw(calendars(after, timezone=draw(st.sampled_from([tz, None]))))
    policy = draw(st.sampled_from(["skip", "defer"]))
    return " ".join(fields), ZoneInfo(tz), calendar, after, policy, draw(keys)


def hash_spec_holds(item, values, lo, hi):
    """Whether `values` are what the H item promises: one value of its range,
    or every step-th value of it from an offset smaller than the step."""
    body, _, step = item.partition("/")
    first, last = (lo, hi) if body == "H" else map(int, body[2:-1].split("-"))
    if not all(first <= v <= last for v in values):
        return False
    if not step:
        return len(values) == 1
    step = int(step)
    ordered = sorted(values)
    return (
        ordered[0] - first < step
        and last - ordered[-1] < step
        and all(b - a == step for a, b in zip(ordered, ordered[1:], strict=False))
    )


# --- the oracle ------------------------------------------------------------------------


def last_of_month(day):
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1) - timedelta(days=1)


def nearest_weekday(day, n):
    """The weekday of day's month closest to day n (None: no day n)."""
    last = last_of_month(day)
    if n > last.day:
        return None
    weekdays = [d for d in range(1, last.day + 1) if date(day.year, day.month, d).weekday() < 5]
    return min(weekdays, key=lambda d: abs(d - n))


def oracle_month_day(item, day):
    item = item.upper()
    if item == "L":
        return day == last_of_month(day)
    if item == "LW":
        last = last_of_month(day)
        while last.weekday() >= 5:
            last -= timedelta(days=1)
        return day == last
    if item.endswith("W"):
        return day.day == nearest_weekday(day, int(item[:-1]))
    return day.day == int(item)


def oracle_weekday(item, day):
    if "-" in item:
        first, last = (NAMES.index(v.lower()) if v.isalpha() else int(v) for v in item.split("-"))
        last = 7 if last == 0 and first > 0 else last  # cronie: mon-sun, 5-0 end on day 7
        return any(cron_weekday(day) == w % 7 for w in range(first, last + 1))
    head, _, nth = item.partition("#")
    last = head.upper().endswith("L")
    head = head[:-1] if last else head
    weekday = NAMES.index(head.lower()) if head.lower() in NAMES else int(head) % 7
    if cron_weekday(day) != weekday:
        return False
    if last:
        return (day + timedelta(days=7)).month != day.month
    if nth:  # the how-many-th such weekday of its month, counted from the 1st
        same = [
            d
            for d in range(1, day.day + 1)
            if date(day.year, day.month, d).weekday() == day.weekday()
        ]
        return len(same) == int(nth)
    return True


def oracle_day(dom, dow, day):
    dom_star, dow_star = dom in ("*", "?"), dow in ("*", "?")
    in_dom = dom_star or any(oracle_month_day(i, day) for i in dom.split(","))
    in_dow = dow_star or any(oracle_weekday(i, day) for i in dow.split(","))
    return (in_dom and in_dow) if (dom_star or dow_star) else (in_dom or in_dow)


class Oracle:
    """Whether a job fires at a UTC minute, from the schedule's text."""

    def __init__(self, text, zone, key=None):
        minute, _, dom, _, dow = text.split(" ")
        parsed = parse_schedule(text, key=key)  # plain minute, hour and month fields only
        self.minutes, self.hours, self.months = parsed.minutes, parsed.hours, parsed.months
        self.dom, self.dow, self.zone = dom, dow, zone
        # Absolute time (docs/design.md §3, §14): every hour, or a minute
        # field written with a leading `*` (cron's MIN_STAR).
        self.absolute = len(self.hours) == 24 or minute.startswith("*")

    def matches(self, w):
        return (
            w.minute in self.minutes
            and w.hour in self.hours
            and w.month in self.months
            and oracle_day(self.dom, self.dow, w.date())
        )

    def wall(self, m):
        return m.astimezone(self.zone).replace(tzinfo=None)

    def fires_at(self, m, w, before):
        """At UTC minute m (wall time w; the minute before it read `before`)."""
        if self.absolute:
            return self.matches(w)  # absolute time
        if self.matches(w) and w.replace(tzinfo=self.zone, fold=0).astimezone(UTC) == m:
            return True  # the first occurrence of a wall time
        skipped = before + ONE_MINUTE
        while skipped < w:  # m ends a gap: the wall times inside it fire now
            if self.matches(skipped):
                return True
            skipped += ONE_MINUTE
        return False

    def occurrences(self, after):
        m = after.replace(second=0, microsecond=0) + ONE_MINUTE
        before = self.wall(m - ONE_MINUTE)
        while m <= after + WALK:
            w = self.wall(m)
            if self.fires_at(m, w, before):
                yield m
            m, before = m + ONE_MINUTE, w


def oracle_next(occurrences, calendar, policy, after):
    for occurrence in occurrences:
        if calendar is None or oracle_allowed(calendar, occurrence):
            return occurrence
        if policy == "defer":
            m = occurrence
            while m <= after + 2 * WALK:
                if oracle_allowed(calendar, m):
                    return m
                m += ONE_MINUTE
            return None
    return None


def check_against_oracle(text, zone, calendar, after, policy, key=None):
    oracle = Oracle(text, zone, key)
    expected = list(oracle.occurrences(after))
    # Chained, calendar ignored: one firing per occurrence, never zero, never two.
    found, t = [], after
    while (t := next_fire(text, zone, None, t, key=key)) is not None and t <= after + WALK:
        found.append(t)
    assert found == expected, text
    if calendar is None:
        return
    wanted = oracle_next(expected, calendar, policy, after)
    got = next_fire(text, zone, calendar, after, policy, key=key)
    if wanted is not None:
        assert got == wanted, text
    elif policy == "skip" or not expected:
        assert got is None or got > after + WALK, text


# --- the properties ----------------------------------------------------------------------


@pytest.mark.parametrize("form", ["L", "LW", "W", "5L", "1#2"])
def test_quartz_day_forms_fire_as_the_oracle_says(form):
    @FORM_SETTINGS
    @given(form_cases(form))
    def check(case):
        check_against_oracle(*case)

    check()


@FORM_SETTINGS
@given(hashed_cases())
def test_hash_forms_fire_as_the_oracle_says(case):
    text, zone, calendar, after, policy, key = case
    parsed = parse_schedule(text, key=key)
    minute, hour = text.split(" ")[:2]
    for field, values, hi in ((minute, parsed.minutes, 59), (hour, parsed.hours, 23)):
        if field.startswith("H"):
            items = {i: values_of(i, key, hi) for i in field.split(",")}
            assert set().union(*items.values()) == set(values)
            assert all(hash_spec_holds(i, found, 0, hi) for i, found in items.items())
    check_against_oracle(text, zone, calendar, after, policy, key=key)


def values_of(item, key, hi):
    """The values one H item resolves to, read through a schedule of that item alone."""
    text = f"{item} * * * *" if hi == 59 else f"0 {item} * * *"
    parsed = parse_schedule(text, key=key)
    return parsed.minutes if hi == 59 else parsed.hours
