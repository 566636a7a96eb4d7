from typing import Any

from django.core.management.base import BaseCommand

from core.commands import WITHOUT_THE_WEB
from scheduler.apply.reference import reference


class Command(BaseCommand):
    help = (
        "Print the apply file's field reference (Markdown), written from the fields "
        "apply validates: croniq-admin apply_reference > docs/apply.md"
    )
    requires_system_checks = WITHOUT_THE_WEB

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(reference(), ending="")
