"""/api/docs documents both APIs: the management calls with an API key
scheme of their own, the runner protocol with the runner token's."""

import json
from html.parser import HTMLParser

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


class ReferencedUrls(HTMLParser):
    """Every script's src and every stylesheet's or icon's href, and the
    Swagger UI settings (the schema URL it fetches)."""

    def __init__(self):
        super().__init__()
        self.urls, self.in_settings, self.settings = [], False, ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and attrs.get("src"):
            self.urls.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.urls.append(attrs["href"])
        self.in_settings = attrs.get("id") == "swagger-settings"

    def handle_data(self, data):
        if self.in_settings:
            self.settings += data


def test_the_docs_page_needs_nothing_but_croniq(client):
    """Offline, behind a firewall or under a strict CSP: every file the page
    loads is one of Croniq's static files, served here."""
    page = client.get("/api/docs")
    assert page.status_code == 200
    parser = ReferencedUrls()
    parser.feed(page.content.decode())
    scripts = [url for url in parser.urls if url.endswith(".js")]
    stylesheets = [url for url in parser.urls if url.endswith(".css")]
    assert scripts and stylesheets
    for url in parser.urls:
        assert url.startswith("/static/"), url
        answer = client.get(url)
        assert answer.status_code == 200, url
        b"".join(answer.streaming_content)  # read it whole: the file is really there
    assert json.loads(parser.settings)["url"] == "/api/openapi.json"
