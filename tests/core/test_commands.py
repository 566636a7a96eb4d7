"""The system checks of the commands that serve no page (core.commands):
they skip the web's families, and only those."""

from io import StringIO

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from core.commands import NOT_THEIRS, WITHOUT_THE_WEB
from scheduler.models import Job
from tests.failing_check import a_failing_system_check

# A URLconf that cannot be imported: a command that loaded it to check it
# would stop.
BROKEN_URLCONF = "tests.core.no_such_urlconf"
# Third-party checks without a tag, which only `check` runs: each is about
# what the web process alone uses (the sign-in pages' settings, the
# authentication middleware).
UNTAGGED_WEB_CHECKS = {
    "allauth.account.checks.adapter_check",
    "allauth.account.checks.settings_check",
    "allauth.mfa.checks.settings_check",
    "allauth.socialaccount.checks.settings_check",
    "django.contrib.auth.checks.check_middleware",
}


def test_every_registered_check_is_in_one_of_the_two_lists():
    known = set(NOT_THEIRS) | set(WITHOUT_THE_WEB)
    registry = checks.registry.registry
    for check in registry.registered_checks | registry.deployment_checks:
        tags = set(getattr(check, "tags", ()))
        if not tags and f"{check.__module__}.{check.__qualname__}" in UNTAGGED_WEB_CHECKS:
            continue
        assert tags, f"{check.__module__}.{check.__qualname__} has no tag: only `check` runs it"
        assert tags & known, f"{check.__module__}.{check.__qualname__}: {tags} is in neither list"


def test_the_loop_ticks_without_loading_the_urlconf(db):
    with override_settings(ROOT_URLCONF=BROKEN_URLCONF):
        call_command("scheduler_loop", "--once", stdout=StringIO(), stderr=StringIO(),
                     skip_checks=False)  # fmt: skip
        # `check` loads it, and fails.
        with pytest.raises(ModuleNotFoundError, match="no_such_urlconf"):
            call_command("check", stdout=StringIO(), stderr=StringIO())


def test_apply_applies_its_file_without_loading_the_urlconf(db, tmp_path):
    path = tmp_path / "croniq.yaml"
    path.write_text("jobs:\n  - name: report\n    schedule: '0 3 * * *'\n    command: echo hi\n")
    with override_settings(ROOT_URLCONF=BROKEN_URLCONF):
        call_command("apply", str(path), stdout=StringIO(), stderr=StringIO(), skip_checks=False)
    assert Job.objects.get(name="report").command == "echo hi"


def test_the_loop_still_stops_on_a_failing_check_of_its_families(db):
    failing = a_failing_system_check(checks.Tags.security)
    with failing, pytest.raises(SystemCheckError, match="tests.E001"):
        call_command("scheduler_loop", "--once", stdout=StringIO(), stderr=StringIO(),
                     skip_checks=False)  # fmt: skip
