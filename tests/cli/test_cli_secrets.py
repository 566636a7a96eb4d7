"""`croniq secrets set|list|delete`: a secret's value goes from standard input
(or a prompt without echo) to `POST /api/v1/secrets` and is never printed;
lists show names, projects and times only."""

import io
import json

import pytest

SECRET = {
    "name": "db-password",
    "project": "default",
    "created_at": "2026-12-01T10:00:00Z",
    "updated_at": "2026-12-01T10:00:00Z",
}


class Terminal(io.StringIO):
    """Standard input that is a terminal: the value must not be read from it."""

    def isatty(self):
        return True


def test_set_sends_the_value_read_from_stdin_and_never_prints_it(api, croniq):
    api.answer(201, SECRET)

    code, out, err = croniq("secrets", "set", "db-password", stdin="correct horse\n")

    assert (code, out, err) == (0, "secret db-password (project default): created\n", "")
    [asked] = api.asked
    assert (asked.method, asked.path) == ("POST", "/api/v1/secrets")
    assert asked.json() == {"name": "db-password", "value": "correct horse"}


def test_set_drops_one_trailing_newline_only(api, croniq):
    api.answer(200, SECRET)

    code, out, _ = croniq("secrets", "set", "db-password", stdin="  two\nlines \n\n")

    assert (code, out) == (0, "secret db-password (project default): value replaced\n")
    assert api.asked[0].json()["value"] == "  two\nlines \n"


def test_set_sends_the_project_it_is_given(api, croniq):
    api.answer(201, SECRET | {"project": "billing"})

    code, out, _ = croniq("secrets", "set", "db-password", "--project", "billing", stdin="x1234")

    assert code == 0
    assert api.asked[0].json() == {"name": "db-password", "value": "x1234", "project": "billing"}


def test_set_with_json_prints_the_answer_without_the_value(api, croniq):
    api.answer(201, SECRET)

    code, out, _ = croniq("secrets", "set", "db-password", "--json", stdin="correct horse")

    assert (code, json.loads(out)) == (0, SECRET)
    assert "correct horse" not in out


@pytest.mark.parametrize("stdin", ["", "\n"])
def test_set_refuses_an_empty_value_without_calling(api, croniq, stdin):
    code, out, err = croniq("secrets", "set", "db-password", stdin=stdin)

    assert (code, out) == (2, "")
    assert err == (
        "croniq: secrets set db-password: the value is empty; give it on standard input "
        "(`croniq secrets set NAME < file`) or type it at the prompt\n"
    )
    assert api.asked == []


def test_at_a_terminal_the_value_is_typed_at_a_prompt_without_echo(api, croniq, monkeypatch):
    prompts = []
    monkeypatch.setattr("getpass.getpass", lambda prompt: prompts.append(prompt) or "typed")
    api.answer(201, SECRET)

    code, out, _ = croniq("secrets", "set", "db-password", stdin=Terminal("not read\n"))

    assert code == 0
    assert prompts == ["value of secret db-password: "]
    assert api.asked[0].json()["value"] == "typed"
    assert "typed" not in out


def test_at_a_terminal_an_empty_answer_is_refused(api, croniq, monkeypatch):
    monkeypatch.setattr("getpass.getpass", lambda prompt: "")

    code, _, err = croniq("secrets", "set", "db-password", stdin=Terminal())

    assert code == 2
    assert "the value is empty" in err
    assert api.asked == []


def test_a_refused_set_prints_the_servers_detail(api, croniq):
    api.answer(422, {"detail": "name: only letters, digits, - and _"})

    code, out, err = croniq("secrets", "set", "bad name", stdin="correct horse")

    assert (code, out) == (1, "")
    assert err == "croniq: HTTP 422: name: only letters, digits, - and _\n"
    assert "correct horse" not in err


def test_list_shows_names_projects_and_times(api, croniq):
    other = SECRET | {"name": "api-token", "project": "billing", "updated_at": "2026-12-02T08:30Z"}
    api.answer(200, {"items": [SECRET], "next_cursor": "c1"})
    api.answer(200, {"items": [other], "next_cursor": None})

    code, out, _ = croniq("secrets", "list")

    assert code == 0
    assert out.splitlines() == [
        "NAME         PROJECT  CREATED               UPDATED",
        "db-password  default  2026-12-01 10:00:00Z  2026-12-01 10:00:00Z",
        "api-token    billing  2026-12-01 10:00:00Z  2026-12-02 08:30:00Z",
    ]
    assert [(a.method, a.path, a.query) for a in api.asked] == [
        ("GET", "/api/v1/secrets", {"limit": "500"}),
        ("GET", "/api/v1/secrets", {"limit": "500", "cursor": "c1"}),
    ]


def test_list_with_json_and_an_empty_list(api, croniq):
    api.answer(200, {"items": [SECRET], "next_cursor": None})
    api.answer(200, {"items": [], "next_cursor": None})

    code, out, _ = croniq("secrets", "list", "--json", "--limit", "5")
    assert (code, json.loads(out)) == (0, {"items": [SECRET], "next_cursor": None})
    assert api.asked[0].query == {"limit": "5"}

    assert croniq("secrets", "list") == (0, "no secrets\n", "")


def test_delete_sends_the_name_as_one_path_segment(api, croniq):
    api.answer(204)

    code, out, err = croniq("secrets", "delete", "team/db")

    assert (code, out, err) == (0, "secret team/db: deleted\n", "")
    [asked] = api.asked
    assert (asked.method, asked.path) == ("DELETE", "/api/v1/secrets/team%2Fdb")


def test_delete_with_json_prints_nothing(api, croniq):
    api.answer(204)

    assert croniq("secrets", "delete", "db-password", "--json") == (0, "", "")


def test_delete_of_an_unknown_name_exits_1_with_the_detail(api, croniq):
    api.answer(404, {"detail": "no secret named 'nope'"})

    code, out, err = croniq("secrets", "delete", "nope")

    assert (code, out, err) == (1, "", "croniq: HTTP 404: no secret named 'nope'\n")
    assert len(api.asked) == 1  # a refusal is not sent again
