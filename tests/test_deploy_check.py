"""`manage.py check --deploy` with the README's production environment reports
nothing, and Croniq's own middleware no longer hides Django's real warnings."""

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.conf import settings
from django.core import checks
from django.test import override_settings

from croniq_project.middleware_list import InstalledMiddleware

ROOT = Path(__file__).resolve().parents[1]
UNSET = ("SECRET_KEY", "DEBUG", "DATABASE_URL")


def readme_production_environment():
    """The NAME=value lines of the README's block for running behind a proxy."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    block = next(b for b in blocks if "SECURE_SSL_REDIRECT=" in b)
    return dict(line.split("=", 1) for line in block.strip().splitlines())


@pytest.fixture
def production(tmp_path):
    """The README's environment made real: a fresh key, a token file, a database."""
    environment = readme_production_environment()
    assert environment["SECRET_KEY"].startswith("<")  # a placeholder, filled in here
    environment["SECRET_KEY"] = secrets.token_urlsafe(50)
    token_file = tmp_path / "metrics_token"
    token_file.write_text("scrape-me\n")
    environment["CRONIQ_METRICS_TOKEN_FILE"] = str(token_file)
    keys_file = tmp_path / "secrets_keys"
    keys_file.write_text(Fernet.generate_key().decode() + "\n")
    environment["CRONIQ_SECRETS_KEYS_FILE"] = str(keys_file)
    environment["DATABASE_URL"] = f"sqlite:///{tmp_path}/croniq.sqlite3"
    return environment


def run(args, environment):
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(environment)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def check_deploy(environment):
    result = run(["manage.py", "check", "--deploy"], environment)
    return result.returncode, result.stdout + result.stderr


def test_the_readme_production_environment_passes_check_deploy(production):
    returncode, output = check_deploy(production)
    assert returncode == 0, output
    assert "System check identified no issues (0 silenced)." in output


@pytest.mark.parametrize(
    ("left_out", "warning"),
    [
        # Each was hidden behind a false "middleware missing" (W001/W003).
        ("SECURE_HSTS_SECONDS", "security.W004"),
        ("SECURE_SSL_REDIRECT", "security.W008"),
        ("CSRF_COOKIE_SECURE", "security.W016"),
    ],
)
def test_a_real_warning_is_no_longer_hidden(production, left_out, warning):
    del production[left_out]
    returncode, output = check_deploy(production)
    assert warning in output
    for false_alarm in ("security.W001", "security.W002", "security.W003"):
        assert false_alarm not in output


def test_a_middleware_that_is_really_missing_is_still_reported():
    without_security = InstalledMiddleware(
        m for m in settings.MIDDLEWARE if not m.endswith("SecurityHeadersMiddleware")
    )
    with override_settings(MIDDLEWARE=without_security):
        found = {m.id for m in checks.run_checks(include_deployment_checks=True)}
    assert "security.W001" in found
    assert "security.W002" not in found


def test_subclasses_answer_for_their_django_base_and_nothing_else():
    installed = InstalledMiddleware(["croniq_project.middleware.BrowserCsrfMiddleware"])
    assert "django.middleware.csrf.CsrfViewMiddleware" in installed
    assert "croniq_project.middleware.BrowserCsrfMiddleware" in installed
    assert "django.middleware.security.SecurityMiddleware" not in installed
    assert "no.such.Middleware" not in installed


# The settings the README sets, seen from a client: browsers go to HTTPS with
# secure cookies and HSTS; probes, scrapes and runners are not redirected.
CLIENT_SCRIPT = """
import json, django
django.setup()
from django.test import Client
plain, proxied = Client(), Client(HTTP_X_FORWARDED_PROTO="https")
host = {"HTTP_HOST": "croniq.example.com"}
answers = {}
for name, client, path, extra in [
    ("login_plain", plain, "/accounts/login/", {}),
    ("login_https", proxied, "/accounts/login/", {}),
    ("healthz", plain, "/healthz", {}),
    ("metrics", plain, "/metrics", {}),
    ("metrics_token", plain, "/metrics", {"HTTP_AUTHORIZATION": "Bearer scrape-me"}),
    ("api", plain, "/api/v1/runners/1/poll", {"content_type": "application/json"}),
]:
    method = client.post if path.startswith("/api/") else client.get
    r = method(path, **host, **extra)
    answers[name] = {
        "status": r.status_code,
        "location": r.get("Location", ""),
        "hsts": r.get("Strict-Transport-Security", ""),
        "cookies": {k: bool(v["secure"]) for k, v in r.cookies.items()},
    }
print(json.dumps(answers))
"""


def test_the_production_settings_redirect_browsers_only(production):
    assert run(["manage.py", "migrate", "--no-input"], production).returncode == 0
    result = run(["-W", "ignore", "-c", CLIENT_SCRIPT], production)
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout.strip().splitlines()[-1])
    assert answers["login_plain"]["status"] == 301
    assert answers["login_plain"]["location"] == "https://croniq.example.com/accounts/login/"
    https = answers["login_https"]
    assert https["status"] == 200
    assert https["hsts"] == "max-age=31536000; includeSubDomains; preload"
    assert https["cookies"] == {"csrftoken": True}
    assert answers["healthz"]["status"] == 200
    assert answers["metrics"]["status"] == 401  # the token, not a redirect
    assert answers["metrics_token"]["status"] == 200
    assert answers["api"]["status"] == 401  # the runner API's own bearer check
