"""Date formats of Croniq's pages (settings.FORMAT_MODULE_PATH).

An instant is never shown without its timezone: the admin's dates (created,
claimed, finished, scheduled for, ...) read like the fire times beside them,
e.g. "Mon 2026-11-30 11:40:33 UTC" (TIME_ZONE is UTC unless set).
"""

DATETIME_FORMAT = "D Y-m-d H:i:s T"
