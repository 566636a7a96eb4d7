"""docs/migrating-from-crontab.md stays true: its example crontabs give,
byte for byte, the documents and reports the page shows."""

import re
from pathlib import Path

from croniq_runner.crontab import Crontab, import_crontabs, render, wrap_crontab

DOC = (Path(__file__).resolve().parents[2] / "docs" / "migrating-from-crontab.md").read_text()


def block_after(marker, language=""):
    """The fenced block that follows `marker` in the page."""
    start = DOC.index(marker)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(DOC, start)
    assert match, marker
    return match[1]


def test_web1s_document_and_report_are_what_the_page_shows():
    crontab = block_after("`web1`, `crontab -l` as `deploy`")
    result = import_crontabs(
        [Crontab("crontab -l", crontab)], timezone="Europe/Berlin", host="web1"
    )
    assert len(crontab.splitlines()) == 15
    assert render(result) == block_after("`web1.yaml`", "yaml")
    assert result.report_text() == block_after("`web1.report`:")


def test_db1s_and_batch1s_reports_are_what_the_page_shows():
    db1 = import_crontabs(
        [Crontab("/etc/cron.d/pgbackup", block_after("`db1`, `/etc/cron.d/pgbackup`"))],
        timezone="UTC",
        host="db1",
        system=True,
    )
    assert db1.report_text() == block_after("`db1.report`:")
    batch1 = import_crontabs(
        [Crontab("batch1.crontab", block_after("`batch1`, a user crontab, saved"))],
        timezone="America/Chicago",
        host="batch1",
    )
    assert batch1.report_text() == block_after("`batch1.report`:")


def test_web1s_checks_report_first_check_and_wrapped_crontab_are_what_the_page_shows():
    crontab = Crontab("crontab -l", block_after("`web1`, `crontab -l` as `deploy`"))
    result = import_crontabs([crontab], timezone="Europe/Berlin", host="web1", checks=True)
    assert result.report_text() == block_after("`web1-checks.report`:")
    first = block_after("The first check in `web1-checks.yaml`", "yaml")
    assert first in render(result)
    # The page shortens the tokens to TOKEN_1, TOKEN_2, ... in the checks' order.
    tokens = {check["name"]: f"TOKEN_{n}" for n, check in enumerate(result.document["checks"], 1)}
    wrapped, _ = wrap_crontab(crontab, result, tokens, "https://croniq.example.com")
    assert wrapped == block_after("`web1.wrapped` (tokens shortened")
