"""`/favicon.ico` answers with Croniq's icon to anyone (browsers ask for it
before anyone logs in), and every page links the same icon as SVG."""

import re

import pytest
from django.contrib.staticfiles import finders

from core.favicon import ICON

ICO_HEADER = b"\x00\x00\x01\x00"  # reserved 0, type 1 (icon)


def test_favicon_ico_answers_with_the_icon_without_a_login(client):
    answer = client.get("/favicon.ico")

    assert answer.status_code == 200
    assert answer["Content-Type"] == "image/x-icon"
    assert "max-age" in answer["Cache-Control"]
    assert answer.content == ICON.read_bytes()
    assert answer.content.startswith(ICO_HEADER)


def test_favicon_ico_answers_a_head_and_refuses_a_post(client):
    assert client.head("/favicon.ico").status_code == 200
    assert client.post("/favicon.ico").status_code == 405


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "logged_in"), [("/accounts/login/", False), ("/admin/", True), ("/", True)]
)
def test_the_pages_link_the_icon(client, admin_user, path, logged_in):
    if logged_in:
        client.force_login(admin_user)

    answer = client.get(path)

    assert answer.status_code == 200
    links = r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">'
    (href,) = re.findall(links, answer.content.decode())
    assert href.endswith("/croniq/favicon.svg")
    assert finders.find("croniq/favicon.svg") is not None
