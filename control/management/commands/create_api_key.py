from argparse import SUPPRESS, ArgumentParser
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import IntegrityError, transaction
from django.utils import timezone

import audit
from control import reach
from control.models import ApiKey
from scheduler.apply.items import ApplyError, seconds


class Command(BaseCommand):
    help = "Create an API key for the management API and print it (shown only this once)."
    # Like Django's changepassword, minting a credential skips the system
    # checks: they import the whole URLconf and the management API's
    # schemas (half a second of CPU) and check nothing this command uses;
    # `manage.py check` and every long-running command still run them.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="A name for the key: who or what uses it.")
        # Scripts written when it ran the checks may still pass it.
        parser.add_argument("--skip-checks", action="store_true", help=SUPPRESS)
        parser.add_argument(
            "--scopes",
            nargs="+",
            required=True,
            help="What the key may do, e.g. jobs:read jobs:trigger (docs/design.md §8); admin: all",
        )
        parser.add_argument(
            "--expires-in", help="A duration such as 90d or 12h; the key never expires without it."
        )
        parser.add_argument(
            "--project",
            default="",
            help="Bind the key to this project: everything outside it is unknown to the key "
            "(docs/design.md §11). Without it the key is global.",
        )

    def handle(
        self,
        *args: Any,
        name: str,
        scopes: list[str],
        expires_in: str | None = None,
        project: str = "",
        **options: Any,
    ) -> None:
        name = name.strip()
        if not name or len(name) > ApiKey._meta.get_field("name").max_length:
            raise CommandError("key name: 1 to 100 characters")
        if project and not reach.known(project):
            raise CommandError(f"--project: no project named {project!r}")
        now = timezone.now()
        expires_at = None
        if expires_in:
            try:
                expires_at = now + timedelta(seconds=seconds("--expires-in", expires_in, least=1))
            except ApplyError as error:
                raise CommandError(str(error)) from None
        try:
            with transaction.atomic():
                key, secret = ApiKey.issue(
                    name, scopes, expires_at, created_by="command", project=project
                )
                data = {"via": "command", "scopes": key.scopes}
                if project:
                    data["project"] = project
                audit.record("apikey.created", target=key, at=now, data=data)
        except ValueError as error:
            raise CommandError(f"--scopes: {error}") from None
        except IntegrityError:
            raise CommandError(f"an API key named {name!r} exists already") from None
        self.stdout.write(secret)
        bound = f" (bound to project {project})" if project else ""
        self.stderr.write(f"API key {name!r}{bound} created; the key above is not shown again.")
