"""The project-wide templates: the layout the dashboard extends and the
admin's branding (templates/ at the top of the project)."""

from django.urls import reverse


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
