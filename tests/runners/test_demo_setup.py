"""`manage.py demo_setup`, which `make run` calls before starting the demo."""

import io

from django.contrib.auth import get_user_model
from django.core.mail.backends.console import EmailBackend
from django.core.management import call_command
from django.utils.module_loading import import_string

from runners.models import RunnerToken


def env_of(path):
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def test_the_env_file_carries_a_working_token_and_console_email(db, tmp_path):
    path = tmp_path / ".croniq" / "demo.env"
    call_command("demo_setup", env_file=str(path), stdout=io.StringIO())
    env = env_of(path)
    assert RunnerToken.objects.authenticate(env["CRONIQ_TOKEN"]).name == "demo"
    # Notification emails of the demo land on the console, not on an SMTP server.
    assert import_string(env["EMAIL_BACKEND"]) is EmailBackend
    assert path.stat().st_mode & 0o777 == 0o600
    assert get_user_model().objects.get(username="admin").is_superuser


def test_running_it_again_replaces_the_token(db, tmp_path):
    path = tmp_path / "demo.env"
    call_command("demo_setup", env_file=str(path), stdout=io.StringIO())
    first = env_of(path)["CRONIQ_TOKEN"]
    call_command("demo_setup", env_file=str(path), stdout=io.StringIO())
    assert RunnerToken.objects.authenticate(first) is None
    assert RunnerToken.objects.authenticate(env_of(path)["CRONIQ_TOKEN"]).name == "demo"
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_it_ends_with_where_to_log_in(db, tmp_path):
    out = io.StringIO()
    url = "http://127.0.0.1:8123/"
    call_command("demo_setup", env_file=str(tmp_path / "demo.env"), url=url, stdout=out)
    last = out.getvalue().splitlines()[-1]
    assert "http://127.0.0.1:8123/admin/" in last
    assert "'admin'" in last and "'croniq-demo'" in last


def test_notification_links_point_at_the_port_the_demo_answers_on(db, tmp_path, monkeypatch):
    monkeypatch.delenv("CRONIQ_PUBLIC_URL", raising=False)
    path = tmp_path / "demo.env"
    url = "http://127.0.0.1:8123/"
    call_command("demo_setup", env_file=str(path), url=url, stdout=io.StringIO())
    assert env_of(path)["CRONIQ_PUBLIC_URL"] == "http://127.0.0.1:8123"


def test_a_public_url_already_set_is_kept(db, tmp_path, monkeypatch):
    monkeypatch.setenv("CRONIQ_PUBLIC_URL", "https://croniq.example.com")
    path = tmp_path / "demo.env"
    call_command(
        "demo_setup", env_file=str(path), url="http://127.0.0.1:8123/", stdout=io.StringIO()
    )
    assert env_of(path)["CRONIQ_PUBLIC_URL"] == "https://croniq.example.com"
