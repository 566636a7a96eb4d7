import pytest
import requests

pytestmark = pytest.mark.e2e


def test_a_real_uvicorn_serves_health_admin_docs_and_metrics(server):
    assert requests.get(server.url + "/healthz", timeout=5).json() == {"status": "ok"}

    login = requests.get(server.url + "/admin/login/", timeout=5)
    assert login.status_code == 200
    assert 'name="username"' in login.text

    # The admin's stylesheet comes through whitenoise, no separate web server.
    css = requests.get(server.url + "/static/admin/css/base.css", timeout=5)
    assert css.status_code == 200

    docs = requests.get(server.url + "/api/docs", timeout=5)
    assert docs.status_code == 200
    schema = requests.get(server.url + "/api/openapi.json", timeout=5).json()
    assert schema["info"]["title"] == "Croniq"

    metrics = requests.get(server.url + "/metrics", timeout=5)
    assert metrics.status_code == 200
    assert "croniq_executions_pending" in metrics.text
    assert "django_http_requests_total_by_method_total" in metrics.text


def test_admin_requires_login(server):
    answer = requests.get(server.url + "/admin/", timeout=5, allow_redirects=False)
    assert answer.status_code == 302
    assert answer.headers["Location"].startswith("/admin/login/")


def test_healthz_answers_503_when_the_database_is_unreachable(tmp_path):
    from harness.processes import Server, wait_for

    # Nothing listens on port 9: the database is down from the server's view.
    server = Server("postgres://postgres@127.0.0.1:9/croniq", tmp_path / "web.log")
    try:

        def answer():
            try:
                return [requests.get(server.url + "/healthz", timeout=5)]
            except requests.ConnectionError:
                return None

        [health] = wait_for(answer, timeout=30, message="uvicorn to answer")
        assert health.status_code == 503
        assert health.json()["status"] == "unavailable"
    finally:
        server.stop()
