#!/usr/bin/env python
"""The checkout's manage.py; installed, the same is `croniq-admin`."""

from croniq_project.cli import main

if __name__ == "__main__":
    main()
