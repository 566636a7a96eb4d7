"""`croniq-admin rotate_secrets`: re-encrypt every stored secret, and every
two-factor authenticator's secrets, under the first key of
CRONIQ_SECRETS_KEYS (docs/design.md §11). Idempotent: run it after putting
a new key first, then remove the old key."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from core.commands import WITHOUT_THE_WEB
from vault import authenticators, crypto, store


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored secret and two-factor authenticator under the first key "
        "of CRONIQ_SECRETS_KEYS."
    )
    requires_system_checks = WITHOUT_THE_WEB

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
        now = timezone.now()
        rotated, unreadable = store.rotate_all(actor=None, now=now)
        self.stdout.write(f"rotated {rotated} secret(s) under the first key")
        rotated_mfa, unreadable_mfa = authenticators.rotate_all(actor=None, now=now)
        self.stdout.write(f"rotated {rotated_mfa} two-factor authenticator(s) under the first key")
        problems = []
        if unreadable:
            problems.append(
                f"{len(unreadable)} secret(s) no configured key decrypts (left as they are): "
                + ", ".join(unreadable)
            )
        if unreadable_mfa:
            problems.append(
                f"{len(unreadable_mfa)} two-factor authenticator(s) no configured key decrypts "
                "(left as they are; their users cannot sign in until the key is back, or a "
                "superuser removes the authenticator and its user sets it up again): "
                + ", ".join(unreadable_mfa)
            )
        if problems:
            raise CommandError("; ".join(problems))
