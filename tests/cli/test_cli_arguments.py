"""The `croniq` command line: what it asks of the API for each command, and
how it refuses bad usage (exit 2) before calling anything."""

import io

import pytest

from croniq_runner.cli import build_parser, main


def usage_exit(*argv):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(list(argv))
    return exited.value.code


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["jobs"],
        ["jobs", "frobnicate"],
        ["jobs", "show"],
        ["jobs", "trigger", "x", "--env", "NOEQUALS"],
        ["jobs", "next", "x", "--count", "0"],
        ["jobs", "backfill", "x", "--start", "2026-01-01T00:00Z"],
        ["executions", "show", "not-a-number"],
        ["executions", "list", "--limit", "-3"],
        ["runners", "drain"],
        ["apply"],
    ],
)
def test_bad_usage_exits_2(argv, capsys):
    assert usage_exit(*argv) == 2
    assert "usage: croniq" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("environ", "argv", "message"),
    [
        ({}, [], "no server"),
        ({"CRONIQ_SERVER": "croniq.example"}, [], "http:// or https://"),
        ({"CRONIQ_SERVER": "http://127.0.0.1:9"}, [], "no API key"),
        (
            {"CRONIQ_SERVER": "http://127.0.0.1:9"},
            ["--api-key-file", "/nonexistent/key"],
            "cannot read /nonexistent/key",
        ),
    ],
)
def test_a_missing_server_or_key_exits_2_without_calling(environ, argv, message):
    err = io.StringIO()

    code = main([*argv, "jobs", "list"], environ=environ, out=io.StringIO(), err=err)

    assert code == 2
    assert message in err.getvalue()


def test_common_options_come_before_or_after_the_command(api, croniq, tmp_path):
    key = tmp_path / "key"
    key.write_text("crk_from_file\n")
    api.answer(200, {"items": [], "next_cursor": None})
    api.answer(200, {"items": [], "next_cursor": None})

    before = croniq("--json", "--api-key-file", str(key), "jobs", "list")
    after = croniq("jobs", "list", "--json", "--api-key-file", str(key))

    assert before == after == (0, '{\n  "items": [],\n  "next_cursor": null\n}\n', "")
    assert [a.headers["Authorization"] for a in api.asked] == ["Bearer crk_from_file"] * 2


def test_an_empty_key_file_is_refused_not_passed_over_for_the_environment(croniq, api, tmp_path):
    key = tmp_path / "key"
    key.write_text("  \n")

    assert croniq("--api-key-file", str(key), "jobs", "list")[0] == 2
    assert not api.asked


def test_trigger_sends_the_key_the_env_and_the_instant(api, croniq):
    api.answer(202, {"execution_id": 7, "deduplicated": False})

    code, out, _ = croniq(
        "jobs", "trigger", "nightly report", "--idempotency-key", "k1",
        "--env", "A=1", "B=x=y", "--env", "C=", "--scheduled-for", "2026-12-01T10:00:00Z",
    )  # fmt: skip

    assert (code, out) == (0, "execution 7 triggered\n")
    [asked] = api.asked
    assert (asked.method, asked.path) == ("POST", "/api/v1/jobs/nightly%20report/trigger")
    assert asked.json() == {
        "idempotency_key": "k1",
        "env": {"A": "1", "B": "x=y", "C": ""},
        "scheduled_for": "2026-12-01T10:00:00Z",
    }


def test_a_name_with_a_slash_stays_one_path_segment(api, croniq):
    api.answer(404, {"detail": "no job named 'a/b'"})

    croniq("jobs", "show", "a/b")

    assert api.asked[0].path == "/api/v1/jobs/a%2Fb"


def test_pause_backfill_and_next_send_what_they_were_given(api, croniq):
    job = {"name": "j", "paused": True, "paused_until": "2026-12-02T08:00:00+01:00"}
    api.answer(200, job)
    api.answer(202, {"instants": ["2026-12-01T00:00:00Z", "2026-12-01T01:00:00Z"], "created": 0})
    api.answer(200, {"instants": ["2026-12-01T02:00:00+00:00"]})

    paused = croniq("jobs", "pause", "j", "--reason", "deploy", "--until", "2026-12-02T08:00+01:00")
    backfilled = croniq(
        "jobs", "backfill", "j", "--start", "2026-12-01T00:00Z", "--end", "2026-12-01T02:00Z",
        "--dry-run",
    )  # fmt: skip
    upcoming = croniq("jobs", "next", "j", "--count", "1")

    assert paused == (0, "job j: paused until 2026-12-02 07:00:00Z\n", "")
    assert backfilled[1].splitlines() == [
        "2026-12-01T00:00:00Z",
        "2026-12-01T01:00:00Z",
        "would create 2 execution(s)",
    ]
    assert upcoming == (0, "2026-12-01T02:00:00+00:00\n", "")
    pause, backfill, next_ = api.asked
    assert pause.json() == {"reason": "deploy", "until": "2026-12-02T08:00+01:00"}
    assert backfill.json() == {
        "start": "2026-12-01T00:00Z",
        "end": "2026-12-01T02:00Z",
        "dry_run": True,
    }
    assert (next_.path, next_.query) == ("/api/v1/jobs/j/next", {"count": "1"})


def test_apply_sends_the_file_as_it_is(api, croniq, tmp_path):
    text = "jobs:\n  - name: a  # a comment the server reads too\n    schedule: '@daily'\n"
    path = tmp_path / "croniq.yaml"
    path.write_text(text)
    api.answer(
        200,
        {
            "changes": [
                {"action": "create", "kind": "job", "name": "a", "diff": {}},
                {"action": "update", "kind": "job", "name": "b", "diff": {"schedule": 1, "env": 2}},
                {"action": "delete", "kind": "calendar", "name": "c", "diff": {}},
            ],
            "applied": False,
        },
    )

    code, out, _ = croniq("apply", str(path), "--dry-run", "--prune")

    assert code == 0
    assert out.splitlines() == [
        "+ job a",
        "~ job b: env, schedule",
        "- calendar c",
        "would apply 3 change(s)",
    ]
    [asked] = api.asked
    assert asked.headers["Content-Type"] == "application/yaml"
    assert asked.body == text.encode()
    assert asked.query == {"dry_run": "true", "prune": "true", "source": "croniq"}


def test_apply_prints_the_servers_label_warnings_on_stderr(api, croniq, tmp_path):
    path = tmp_path / "croniq.yaml"
    path.write_text("jobs: []\n")
    warning = "job train: no runner has carried gpu; its runs wait until one registers"
    api.answer(200, {"changes": [], "applied": True, "warnings": [warning]})

    code, out, err = croniq("apply", str(path))

    assert code == 0
    assert "warning" not in out
    assert err == f"warning: {warning}\n"


def test_apply_of_a_file_it_cannot_read_exits_2(api, croniq, tmp_path):
    code, _, err = croniq("apply", str(tmp_path / "missing.yaml"))

    assert code == 2
    assert "cannot read" in err
    assert not api.asked


def test_apply_sends_the_source_it_is_given(api, croniq, tmp_path):
    path = tmp_path / "v2.yaml"
    path.write_text("jobs: []\n")
    api.answer(200, {"changes": [], "applied": True})

    code, _, _ = croniq("apply", str(path), "--source", "billing")

    assert code == 0
    [asked] = api.asked
    assert asked.query == {"source": "billing"}
