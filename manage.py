#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "croniq_project.settings")
    from django.core.management import execute_from_command_line

    from croniq_project.startup import fail_on_bad_configuration

    fail_on_bad_configuration(lambda: execute_from_command_line(sys.argv))


if __name__ == "__main__":
    main()
