"""`croniq-admin`: Django's manage.py, installed as a command.

Installed with the package (`pip install .`, `make install`, the Docker
image), so it works from any directory, with no checkout and no
`python manage.py` to remember.
"""

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    from django.core.management import execute_from_command_line

    from croniq_project.startup import fail_on_bad_configuration

    argv = sys.argv if argv is None else argv
    fail_on_bad_configuration(lambda: execute_from_command_line(argv))
