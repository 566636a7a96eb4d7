"""`croniq-admin rotate_secrets`: re-encrypt every stored secret under the
first key of CRONIQ_SECRETS_KEYS (docs/design.md §11). Idempotent: run it
after putting a new key first, then remove the old key."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from vault import crypto, store


class Command(BaseCommand):
    help = "Re-encrypt every stored secret under the first key of CRONIQ_SECRETS_KEYS."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--new-key",
            action="store_true",
            help="Print a new key to put first in CRONIQ_SECRETS_KEYS, and change nothing.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["new_key"]:
            self.stdout.write(crypto.new_key())
            return
        rotated, unreadable = store.rotate_all(actor=None, now=timezone.now())
        self.stdout.write(f"rotated {rotated} secret(s) under the first key")
        if unreadable:
            raise CommandError(
                f"{len(unreadable)} secret(s) no configured key decrypts (left as they are): "
                + ", ".join(unreadable)
            )
