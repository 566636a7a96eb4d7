"""The replayer's rules, without a server: placeholders, paths, shapes and
expectations, and the case files themselves."""

import json

import pytest

from croniq_runner.conformance.matching import (
    NOT_JSON,
    PLACEHOLDER,
    CaseError,
    expectation_errors,
    lookup,
    shape_errors,
    substitute,
)
from croniq_runner.conformance.replay import (
    REQUIRES,
    Config,
    initial_values,
    load_cases,
    run_case,
)

VALUES = {
    "token": "crq_secret",
    "unique": "abc123",
    "work": {"id": 42, "lease": 3, "env": {"A": "1"}},
    "runner": 7,
}


def test_a_whole_string_placeholder_keeps_the_values_json_type():
    assert substitute("${work.id}", VALUES) == 42
    assert substitute("${work.env}", VALUES) == {"A": "1"}
    assert substitute(["${work.id}", "${runner}"], VALUES) == [42, 7]


def test_a_placeholder_inside_text_is_spliced_in_as_text():
    assert substitute("/api/v1/runners/${runner}/poll", VALUES) == "/api/v1/runners/7/poll"
    assert substitute("Bearer ${token}", VALUES) == "Bearer crq_secret"
    assert substitute("s1-${unique}", VALUES) == "s1-abc123"


def test_an_offset_adds_to_an_integer_value():
    assert substitute("${work.lease+1}", VALUES) == 4
    assert substitute("${work.lease-3}", VALUES) == 0
    with pytest.raises(CaseError, match="not an integer"):
        substitute("${token+1}", VALUES)


def test_substitution_reaches_into_objects_and_leaves_other_values_alone():
    body = {"session": "s-${unique}", "lease": "${work.lease}", "wait": 1.5, "x": None, "y": True}
    assert substitute(body, VALUES) == {
        "session": "s-abc123",
        "lease": 3,
        "wait": 1.5,
        "x": None,
        "y": True,
    }


def test_repeat_builds_a_long_string():
    assert substitute({"$repeat": "ab", "times": 3}, VALUES) == "ababab"
    assert len(substitute({"data": {"$repeat": "x", "times": 65537}}, VALUES)["data"]) == 65537


def test_an_unknown_placeholder_or_path_is_a_case_error():
    with pytest.raises(CaseError, match="unknown placeholder"):
        substitute("${nothing}", VALUES)
    with pytest.raises(CaseError, match="no 'missing'"):
        substitute("${work.missing}", VALUES)
    assert substitute("$work and {work}", VALUES) == "$work and {work}"  # not placeholders


def test_lookup_follows_object_keys_and_array_indexes():
    body = {"executions": [{"id": 1}, {"id": 2}]}
    assert lookup(body, "executions.1.id") == 2
    assert lookup(body, "") is body
    with pytest.raises(CaseError):
        lookup(body, "executions.2")
    with pytest.raises(CaseError):
        lookup(body, "executions.id")


@pytest.mark.parametrize(
    ("value", "shape"),
    [
        (1, "integer"),
        (1.0, "integer"),  # JSON does not tell 1 from 1.0
        (1.5, "number"),
        (1, "number"),
        ("x", "string"),
        (None, ["integer", "null"]),
        ([1, 2], {"$array": "integer"}),
        ([], {"$array": {"id": "integer"}}),
        ({"id": 1, "extra": "allowed"}, {"id": "integer"}),
        ({"a": {"b": [True]}}, {"a": {"b": {"$array": "boolean"}}}),
    ],
)
def test_values_that_fit_their_shape(value, shape):
    assert shape_errors(value, shape) == []


@pytest.mark.parametrize(
    ("value", "shape", "error"),
    [
        (True, "integer", "body: expected integer, got true"),
        (True, "number", "body: expected number, got true"),
        (1.5, "integer", "body: expected integer, got 1.5"),
        ("1", "integer", 'body: expected integer, got "1"'),
        (0, "boolean", "body: expected boolean, got 0"),
        ({}, {"runner_id": "integer"}, "body: missing key 'runner_id'"),
        ({"lost": [1, "2"]}, {"lost": {"$array": "integer"}}, "body.lost.1: expected integer"),
        ({"e": {}}, {"e": {"$array": "integer"}}, "body.e: expected array, got {}"),
        ([], {"id": "integer"}, "body: expected object, got []"),
        (1, ["string", "null"], "body: expected string or null, got 1"),
    ],
)
def test_values_that_do_not_fit_their_shape(value, shape, error):
    [found] = shape_errors(value, shape)
    assert found.startswith(error)


def test_an_unknown_type_name_is_a_case_error():
    with pytest.raises(CaseError, match="unknown JSON type 'int'"):
        shape_errors(1, "int")


def test_a_wrong_status_is_reported_before_anything_else():
    expect = {"status": 409, "shape": {"detail": "string"}}
    errors = expectation_errors(expect, 200, {"state": "succeeded"}, 0.1, VALUES)
    assert errors == ["status: expected 409, got 200"]
    assert expectation_errors({"status": [200, 204]}, 500, NOT_JSON, 0, VALUES) == [
        "status: expected 200 or 204, got 500"
    ]


def test_equals_contains_and_length_resolve_placeholders_and_name_the_path():
    body = {"renewed": [42], "lost": [], "takeover": True, "executions": [{}, {}]}
    passing = {
        "status": 200,
        "equals": {"renewed": ["${work.id}"], "lost": [], "takeover": True},
        "contains": {"renewed": "${work.id}"},
        "length": {"executions": 2},
    }
    assert expectation_errors(passing, 200, body, 0, VALUES) == []
    failing = {
        "equals": {"lost": ["${work.id}"], "takeover": 1, "nope": 1},
        "contains": {"lost": 42},
        "length": {"executions": 1},
    }
    assert expectation_errors(failing, 200, body, 0, VALUES) == [
        "body.lost: expected [42], got []",
        "body.takeover: expected 1, got true",
        "body.nope: missing",
        "body.lost: expected to contain 42, got []",
        "body.executions: expected length 1, got [{}, {}]",
    ]


def test_a_body_check_on_an_answer_that_is_not_json_fails():
    expect = {"status": 401, "shape": {"detail": "string"}}
    assert expectation_errors(expect, 401, NOT_JSON, 0, VALUES) == [
        "body: expected JSON, got something else"
    ]
    assert expectation_errors({"status": 401}, 401, NOT_JSON, 0, VALUES) == []


def test_elapsed_time_bounds():
    assert expectation_errors({"min_seconds": 0.9}, 200, {}, 0.5, VALUES) == [
        "answered after 0.50s, expected at least 0.9s"
    ]
    assert expectation_errors({"min_seconds": 0.9, "max_seconds": 2}, 200, {}, 1.0, VALUES) == []


def test_a_case_whose_requirement_is_missing_is_skipped_without_a_request():
    case = {"name": "needs-two", "requires": ["second_token"], "steps": [{"request": {}}]}
    result = run_case(case, Config("http://127.0.0.1:9", "crq_x"))
    assert (result.outcome, result.reason) == ("skip", REQUIRES["second_token"])


def test_a_case_that_cannot_reach_the_server_fails_at_its_first_step():
    case = {"name": "c", "steps": [{"step": "register", "request": {"path": "/x"}}]}
    result = run_case(case, Config("http://127.0.0.1:9", "crq_x", timeout=2))
    assert (result.outcome, result.step) == ("fail", 1)
    assert result.reason.startswith('step 1 "register": request failed:')


def test_each_case_gets_a_unique_value_of_its_own():
    config = Config("http://x", "crq_x")
    assert initial_values(config)["unique"] != initial_values(config)["unique"]
    assert "second_token" not in initial_values(config)


def test_case_names_are_unique_across_files(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps({"cases": [{"name": "same", "steps": []}]}))
    with pytest.raises(CaseError, match="used twice: same"):
        load_cases(tmp_path)


# -- the shipped case files ---------------------------------------------------

GIVEN = {"token", "second_token", "label", "unique"}
STEP_KEYS = {"step", "request", "expect", "capture", "operator", "skip_unless"}
REQUEST_KEYS = {"method", "path", "headers", "json", "raw"}
EXPECT_KEYS = {"status", "shape", "equals", "contains", "length", "min_seconds", "max_seconds"}


def placeholder_roots(template):
    text = json.dumps(template)
    return {match.group(1).split(".")[0] for match in PLACEHOLDER.finditer(text)}


def shapes_in(expect):
    return [expect["shape"]] if "shape" in expect else []


@pytest.mark.parametrize("case", load_cases(), ids=lambda case: case["name"])
def test_every_shipped_case_is_well_formed(case):
    assert set(case) <= {"name", "description", "requires", "steps"}
    assert case["description"]
    assert set(case.get("requires", [])) <= set(REQUIRES)
    known = set(GIVEN)
    for step in case["steps"]:
        assert set(step) <= STEP_KEYS, step
        assert step["step"], step
        assert ("request" in step) != ("operator" in step), step
        used = {key: value for key, value in step.items() if key not in ("capture", "skip_unless")}
        assert placeholder_roots(used) <= known, step
        if "operator" in step:
            assert "operator" in case["requires"]
            continue
        assert set(step["request"]) <= REQUEST_KEYS
        assert step["request"]["path"].startswith("/api/v1/")
        assert set(step["expect"]) <= EXPECT_KEYS
        assert isinstance(step["expect"]["status"], int)
        for shape in shapes_in(step["expect"]):
            shape_errors(None, shape)  # raises on an unknown type name
        known |= set(step.get("capture", {}))
        if "skip_unless" in step:
            assert set(step["skip_unless"]) <= EXPECT_KEYS | {"reason"}
            assert placeholder_roots(step["skip_unless"]) <= known, step
    if "second_token" in placeholder_roots(case):
        assert "second_token" in case["requires"]


def test_the_cases_cover_every_call_and_every_error_status_of_the_protocol():
    steps = [step for case in load_cases() for step in case["steps"] if "request" in step]
    calls = {step["request"]["path"].rsplit("/", 1)[1] for step in steps}
    assert calls >= {"register", "poll", "heartbeat", "hand-back", "logs", "finish"}
    statuses = {step["expect"]["status"] for step in steps}
    assert statuses >= {200, 400, 401, 403, 404, 409, 413, 422}
