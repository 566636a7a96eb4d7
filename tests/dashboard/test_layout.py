"""The project-wide templates: the layout the dashboard extends and the
admin's branding and colours (templates/ at the top of the project)."""

import re
from pathlib import Path
from urllib.parse import urlsplit

from django.test import Client
from django.urls import resolve, reverse

from dashboard import urls as dashboard_urls
from tests.e2e import test_themes_browser as themes_browser

ROOT = Path(__file__).resolve().parents[2]


def template_names(response):
    return [template.name for template in response.templates]


def test_dashboard_pages_extend_the_project_layout(staff_client):
    response = staff_client.get(reverse("dashboard:overview"))
    assert response.status_code == 200
    names = template_names(response)
    assert names.index("dashboard/overview.html") < names.index("dashboard/base.html")
    assert names.index("dashboard/base.html") < names.index("base.html")
    page = response.content.decode()
    assert '<a class="brand" href="/">Croniq</a>' in page
    assert "dashboard/dashboard.css" in page
    assert "Overview · Croniq</title>" in page


def test_the_admin_login_page_carries_croniqs_name(client, db):
    # The admin's login page sends people to the sign-in page (allauth's).
    response = client.get(reverse("admin:login"), follow=True)
    assert response.redirect_chain == [("/accounts/login/?next=%2Fadmin%2Flogin%2F", 302)]
    assert response.status_code == 200
    assert "admin/base_site.html" in template_names(response)
    page = response.content.decode()
    assert "Croniq admin" in page
    assert "Django administration" not in page
    assert "| Croniq admin</title>" in page


def test_the_admin_links_back_to_the_dashboard(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert f'<a href="{reverse("dashboard:overview")}">Dashboard</a>' in response.content.decode()


def test_the_admin_and_the_sign_in_pages_load_croniqs_colours(staff_client):
    pages = [staff_client.get(reverse("admin:index")), Client().get(reverse("account_login"))]
    for page in pages:
        assert page.status_code == 200
        html = page.content.decode()
        # After Django's stylesheets, whose custom properties it sets again.
        assert html.index("admin/css/dark_mode.css") < html.index("croniq/admin_theme.css")


def test_the_admins_colours_are_the_dashboards():
    dashboard = colours_in(ROOT / "dashboard/static/dashboard/dashboard.css")
    admin = colours_in(ROOT / "core/static/croniq/admin_theme.css")
    assert admin, "no colour found in the admin's theme"
    assert admin <= dashboard, f"not the dashboard's: {sorted(admin - dashboard)}"


def colours_in(path):
    return {colour.lower() for colour in re.findall(r"#[0-9a-fA-F]{6}\b", path.read_text())}


# The dashboard's GET routes that answer a page's script, not a person.
SCRIPT_DATA = {"execution-log", "runners-rows", "palette"}


def test_every_page_of_the_dashboard_is_shown_in_both_themes(admin_client):
    """A dashboard route that answers GET (an action's answers 405) is a
    page the theme test visits in both colour schemes, screenshots
    included, or data for a page's script: a new page fails here until it
    is added to tests/e2e/test_themes_browser.py's PAGES."""
    shown = set()
    for path in themes_browser.PAGES.values():
        match = resolve(urlsplit(path.format(job=1, calendar=1, finished=1)).path)
        if match.namespace == "dashboard":
            shown.add(match.url_name)
    answers_get = set()
    for pattern in dashboard_urls.urlpatterns:
        arguments = dict.fromkeys(pattern.pattern.converters, 1)  # 1 is an int and a slug
        url = reverse(f"dashboard:{pattern.name}", kwargs=arguments)
        if admin_client.get(url).status_code != 405:
            answers_get.add(pattern.name)
    unseen = answers_get - SCRIPT_DATA - shown
    assert not unseen, f"dashboard pages the theme test does not visit: {sorted(unseen)}"
    assert shown <= answers_get
