"""Date formats of Croniq's pages (settings.FORMAT_MODULE_PATH).

An instant is shown as everywhere else in Croniq (core/instants.py): ISO
order, a 24-hour clock and the timezone, e.g. "2026-11-30 11:40:33 UTC" for
the admin's dates (created, claimed, finished, scheduled for, ...), in
TIME_ZONE (UTC unless set). Django's English defaults ("Nov. 30, 2026",
"11:40 a.m.") never show: a date alone is ISO too, a time 24-hour.
"""

from core.instants import DJANGO_FORMAT

DATETIME_FORMAT = DJANGO_FORMAT
SHORT_DATETIME_FORMAT = DJANGO_FORMAT
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
