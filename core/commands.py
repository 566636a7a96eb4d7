"""The system checks of a command that serves no page.

Django's commands run every system check before they start. Some families
concern other processes: the URL checks import the URLconf, and with it
every view and the management API's schemas (about 0.30 s of the 1.23 s of
CPU a `scheduler_loop --once` start cost); the admin, template and static
file checks look at what only pages use; the `commands` check compares the
autodetectors of `migrate` and `makemigrations`, importing both (48 ms). A
command that serves no page (the loop, `apply`, `export`, ...) runs every
other family; `manage.py check` and the deploy checks still run them all.
"""

from django.core.checks import Tags

from core.tracing import TRACING_CHECKS

# What only the web process serves, and the check of two other commands; a
# test keeps every registered check in one of the two lists, so that a new
# family is not left out unseen.
NOT_THEIRS = (Tags.admin, Tags.commands, Tags.staticfiles, Tags.templates, Tags.urls)
WITHOUT_THE_WEB = [
    Tags.async_support,
    Tags.caches,
    Tags.compatibility,
    Tags.database,
    Tags.files,
    # Django 6.1's checks of its mailers (`MAILERS`): the loop's notifier
    # sends email. A tag, not `Tags.mail`, which Django 5.2 lacks.
    "mail",
    Tags.models,
    Tags.security,
    Tags.signals,
    Tags.sites,
    Tags.translation,
    TRACING_CHECKS,
]
