"""Bare dates and times on the `croniq` command line go to the server as
typed: the server reads them on the job's clock (docs/design.md §8), which
the CLI cannot know; nothing is refused or converted on the way."""

import pytest

JOB = {"name": "j", "paused": True, "paused_until": "2026-12-07T23:00:00+00:00"}


@pytest.mark.parametrize("until", ["2026-12-08", "2026-12-08T09:00", "2026-12-08 09:00:00"])
def test_pause_sends_a_bare_until_unchanged(api, croniq, until):
    api.answer(200, JOB)

    code, out, err = croniq("jobs", "pause", "j", "--until", until)

    assert (code, err) == (0, "")
    assert api.asked[0].json() == {"reason": "", "until": until}
    assert out == "job j: paused until 2026-12-07 23:00:00Z\n"


def test_backfill_next_and_trigger_send_bare_instants_unchanged(api, croniq):
    api.answer(202, {"instants": ["2026-11-29T23:00:00Z"], "created": 1})
    api.answer(200, {"instants": ["2026-12-07T23:30:00+00:00"]})
    api.answer(202, {"execution_id": 7, "deduplicated": False, "execution_ids": [7]})

    backfilled = croniq("jobs", "backfill", "j", "--start", "2026-11-30", "--end", "2026-12-01")
    upcoming = croniq("jobs", "next", "j", "--after", "2026-12-08")
    triggered = croniq("jobs", "trigger", "j", "--scheduled-for", "2026-12-01T09:00")

    assert [result[0] for result in (backfilled, upcoming, triggered)] == [0, 0, 0]
    backfill, next_, trigger = api.asked
    assert backfill.json() == {"start": "2026-11-30", "end": "2026-12-01", "dry_run": False}
    assert next_.query == {"count": "10", "after": "2026-12-08"}
    assert trigger.json() == {"scheduled_for": "2026-12-01T09:00"}


def test_the_help_says_a_bare_instant_is_read_in_the_jobs_timezone(capsys):
    from croniq_runner.cli import main

    with pytest.raises(SystemExit):
        main(["jobs", "pause", "--help"])

    assert "in the job's timezone" in " ".join(capsys.readouterr().out.split())
