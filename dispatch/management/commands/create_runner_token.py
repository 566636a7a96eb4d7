from argparse import SUPPRESS, ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from runners.models import RunnerToken


class Command(BaseCommand):
    help = "Create a runner token and print its secret (shown only this once)."
    # Like Django's changepassword, minting a credential skips the system
    # checks: they import the whole URLconf and the management API's
    # schemas (half a second of CPU) and check nothing this command uses;
    # `manage.py check` and every long-running command still run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="A name for the token, e.g. the machine or team.")
        # Scripts written when it ran the checks may still pass it.
        parser.add_argument("--skip-checks", action="store_true", help=SUPPRESS)

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        name = name.strip()
        if not name or len(name) > RunnerToken._meta.get_field("name").max_length:
            raise CommandError("token name: 1 to 100 characters")
        try:
            with transaction.atomic():
                token, secret = RunnerToken.issue(name)
        except IntegrityError:
            raise CommandError(f"a token named {name!r} exists already") from None
        now = timezone.now()
        audit.record("runnertoken.created", target=token, at=now, data={"via": "command"})
        self.stdout.write(secret)
        self.stderr.write(f"Token {name!r} created; the secret above is not shown again.")
