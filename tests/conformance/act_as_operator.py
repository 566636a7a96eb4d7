"""The conformance suite's `--operator` for tests: `python act_as_operator.py ACTION JSON`.

Does what an operator does in the admin, on the database in DATABASE_URL:
`cancel` asks a running execution to stop (scheduler.runs.operations.cancel).
"""

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(action, arguments):
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from scheduler.models import Execution
    from scheduler.runs import operations

    if action != "cancel":
        sys.exit(f"unknown operator action {action!r}")
    operator, _ = get_user_model().objects.get_or_create(
        username="conformance-operator", defaults={"is_staff": True, "is_superuser": True}
    )
    asked = Execution.objects.filter(pk=arguments["execution"])
    if operations.cancel(asked, timezone.now(), operator) != 1:
        sys.exit(f"execution {arguments['execution']} was not asked to cancel")


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
