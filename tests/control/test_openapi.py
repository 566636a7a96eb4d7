"""/api/docs documents both APIs: the management calls with an API key
scheme of their own, the runner protocol with the runner token's."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    answer = client.get("/api/openapi.json")
    assert answer.status_code == 200
    return answer.json()


def test_both_security_schemes_are_documented(schema):
    schemes = schema["components"]["securitySchemes"]
    assert schemes["ApiKeyAuth"]["scheme"] == schemes["RunnerAuth"]["scheme"] == "bearer"
    assert "API key" in schemes["ApiKeyAuth"]["description"]


@pytest.mark.parametrize(
    ("method", "path", "tag"),
    [
        ("post", "/api/v1/keys", "keys"),
        ("get", "/api/v1/keys", "keys"),
        ("delete", "/api/v1/keys/{name}", "keys"),
        ("get", "/api/v1/runners", "runners (management)"),
        ("post", "/api/v1/runners/{runner_id}/drain", "runners (management)"),
        ("post", "/api/v1/runners/{runner_id}/resume", "runners (management)"),
        ("post", "/api/v1/runners/{runner_id}/forget", "runners (management)"),
        ("get", "/api/v1/audit", "audit"),
    ],
)
def test_management_calls_use_the_api_key_scheme(schema, method, path, tag):
    operation = schema["paths"][path][method]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    assert operation["tags"] == [tag]


def test_the_runner_protocol_keeps_the_runner_token_scheme(schema):
    operation = schema["paths"]["/api/v1/runners/{runner_id}/poll"]["post"]
    assert operation["security"] == [{"RunnerAuth": []}]


def test_creating_a_key_shows_an_example_body(schema):
    body = schema["paths"]["/api/v1/keys"]["post"]["requestBody"]["content"]["application/json"]
    ref = body["schema"]["$ref"].rsplit("/", 1)[-1]
    [example] = schema["components"]["schemas"][ref]["examples"]
    assert example["scopes"] == ["jobs:read", "jobs:trigger"]


def test_the_docs_page_answers(client):
    assert client.get("/api/docs").status_code == 200
