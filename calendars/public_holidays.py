"""Public holidays of a country (and subdivision), from the holidays package."""

import functools
from collections.abc import Iterable
from datetime import date

import holidays as holidays_lib

# Holidays named in English where the country's data has English names (its
# own language otherwise), whatever the process's locale: the package reads
# it, and Python 3.12 reads C.UTF-8 as "C" (the country's language).
NAMES_IN = "en_US"


@functools.lru_cache(maxsize=1024)
def holiday_names(
    country: str, subdivision: str, categories: tuple[str, ...], year: int
) -> dict[date, str]:
    """{date: name} of the public holidays of one year (cached: building them is slow)."""
    if not country:
        return {}
    found = holidays_lib.country_holidays(
        country,
        subdiv=subdivision or None,
        years=year,
        categories=categories or None,
        language=NAMES_IN,
    )
    return dict(found)


def holiday_problem(
    country: str, subdivision: str = "", categories: Iterable[str] = ()
) -> str | None:
    """A sentence saying what is wrong with a holiday selection, or None."""
    if not country:
        return "a holiday subdivision needs a country" if subdivision else None
    try:
        holiday_names(country, subdivision, tuple(categories), 2000)
    except NotImplementedError:
        supported = holidays_lib.list_supported_countries()
        if country not in supported:
            return f"{country!r} is not a holiday country the holidays package knows (e.g. DE)"
        subdivs = ", ".join(supported[country])
        return f"{subdivision!r} is not a subdivision of {country} (known: {subdivs})"
    except ValueError as exc:
        return f"holiday categories {list(categories)!r} are not supported for {country}: {exc}"
    return None


@functools.cache
def categories_by_country() -> dict[str, list[str]]:
    """{country code: its holiday categories, sorted} for every country of
    the holidays package (about a second the first time: it loads them all)."""
    return {
        country: sorted(holidays_lib.country_holidays(country).supported_categories)
        for country in holidays_lib.list_supported_countries()
    }


def country_categories(country: str) -> list[str]:
    """The holiday categories `country` supports; none for an unknown one."""
    return categories_by_country().get(country, [])


def known_categories() -> list[str]:
    """Every holiday category some country of the holidays package supports, sorted."""
    return sorted({name for names in categories_by_country().values() for name in names})
