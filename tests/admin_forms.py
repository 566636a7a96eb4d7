"""POST payloads of the admin's job and calendar forms, as a browser sends them.

A list value is a field posted several times (ticked checkboxes, rows);
the forms still read the JSON text they took before ('{"A": "1"}',
'["mon"]'), so overrides may use it."""


def job_form(**fields):
    """The job change form with every field filled; `fields` override."""
    return {
        "name": "report",
        "description": "",
        "command": "python report.py",
        # The environment's rows: the blank one the form always offers.
        "env__name": [""],
        "env__value": [""],
        "labels": "",
        "schedule": "30 2 * * *",
        "timezone": "Europe/Berlin",
        "calendar": "",
        "calendar_policy": "skip",
        "misfire_policy": "run_once",
        "overlap": "allow",
        "run_on": "one",
        "maintenance": "skip",
        "requires_policy": "wait",
        "requires_timeout": "3600",
        "retries": "0",
        "retry_backoff": "30",
        "timeout": "",
        "enabled": "on",
        **fields,
    }


def calendar_form(**fields):
    """The calendar form with one Christmas blackout in its inline periods."""
    return {
        "name": "ops",
        "description": "",
        "timezone": "UTC",
        "weekdays": ["mon", "tue"],
        "holiday_country": "",
        "holiday_subdivision": "",
        "window_start": "",
        "window_end": "",
        "base": "",
        "periods-TOTAL_FORMS": "1",
        "periods-INITIAL_FORMS": "0",
        "periods-MIN_NUM_FORMS": "0",
        "periods-MAX_NUM_FORMS": "1000",
        "periods-0-kind": "exclude",
        "periods-0-label": "freeze",
        "periods-0-start_date": "2026-12-24",
        "periods-0-end_date": "2027-01-06",
        **fields,
    }
