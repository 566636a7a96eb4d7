"""The system checks of a command that serves no page.

Django's commands run every system check before they start. Two families
only concern the web process: the URL checks import the URLconf, and with
it every view and the management API's schemas (about 0.37 s of the 1.3 s
of CPU a `scheduler_loop` start costs), and the admin, template and static
file checks look at what only pages use. A command that serves no page
(the loop, `apply`, `export`, ...) runs every other family; `manage.py
check` and the deploy checks still run them all.
"""

from django.core.checks import Tags

from core.tracing import TRACING_CHECKS

# Only the web process serves these; a test keeps every registered check in
# one of the two lists, so that a new family is not left out unseen.
WEB_ONLY = (Tags.admin, Tags.staticfiles, Tags.templates, Tags.urls)
WITHOUT_THE_WEB = [
    Tags.async_support,
    Tags.caches,
    Tags.commands,
    Tags.compatibility,
    Tags.database,
    Tags.files,
    Tags.models,
    Tags.security,
    Tags.signals,
    Tags.sites,
    Tags.translation,
    TRACING_CHECKS,
]
