"""Every job's next fire instants after a fixed instant, as the running
code's `Job.upcoming` counts them: the upgrade test runs it in the previous
release's tree before its migrate and in the current code after, and the
answers must be the same (jobs keep their behaviour). Never imported by
the suite. Prints one line, `FIRES:` and JSON: {job name: [instants]}."""

import json
from datetime import UTC, datetime

import django

django.setup()

from scheduler.models import Job  # noqa: E402 (after setup)

# Far from any clock change of the rows' zones, and after every row's instants.
AFTER = datetime(2030, 2, 5, 12, 0, tzinfo=UTC)
fires = {}
for job in Job.objects.select_related("calendar").order_by("name"):
    try:
        fires[job.name] = [instant.isoformat() for instant in job.upcoming(AFTER, 5)]
    except ValueError as e:  # a schedule or calendar that cannot be evaluated: the same both sides
        fires[job.name] = f"cannot be evaluated: {e}"
print("FIRES:" + json.dumps(fires, sort_keys=True))
