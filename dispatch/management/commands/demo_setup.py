"""Prepare a local demo: an admin user, the demo jobs and a runner token."""

import os
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand

from runners.models import RunnerToken

DEMO_USER = "admin"
DEMO_PASSWORD = "croniq-demo"
DEMO_FILE = Path(__file__).resolve().parents[3] / "deploy" / "demo.yaml"
# The demo prints notification emails on the console instead of needing SMTP.
DEMO_ENV = {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}


class Command(BaseCommand):
    help = (
        "Create a demo admin user, load deploy/demo.yaml and write the demo's env file "
        "(a runner token, console email)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--env-file",
            required=True,
            help="Where to write the demo's environment (runner token, public URL, email)",
        )
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000/", help="Where the demo will answer."
        )

    def handle(self, *args: Any, env_file: str, url: str, **options: Any) -> None:
        self.ensure_admin()
        if "apply" in get_commands():
            call_command("apply", str(DEMO_FILE))
        self.write_env(Path(env_file), public_url=public_url_of(url))
        # Last, so it is the line above the processes' output.
        admin = url.rstrip("/") + "/admin/"
        self.stdout.write(
            f"Open {admin} (user {DEMO_USER!r}, password {DEMO_PASSWORD!r}); the dashboard is {url}"
        )

    def ensure_admin(self) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(
            username=DEMO_USER, defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(DEMO_PASSWORD)
            user.save()
        self.stdout.write(f"Demo admin (demo only): user {DEMO_USER!r}, password {DEMO_PASSWORD!r}")

    def write_env(self, path: Path, public_url: str) -> None:
        RunnerToken.objects.filter(name="demo").delete()
        _, secret = RunnerToken.issue("demo")
        path.parent.mkdir(parents=True, exist_ok=True)
        env = {"CRONIQ_TOKEN": secret, "CRONIQ_PUBLIC_URL": public_url, **DEMO_ENV}
        lines = [f"{k}={v}" for k, v in env.items()]
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
        self.stdout.write(f"Runner token 'demo' written to {path}")


def public_url_of(url: str) -> str:
    """Where notification links point: the demo's own address (its port may
    not be 8000), unless CRONIQ_PUBLIC_URL is already set."""
    return os.environ.get("CRONIQ_PUBLIC_URL") or url.rstrip("/")
