"""What the keyboard palette (`static/dashboard/palette.js`, Ctrl+K or "/")
jumps to: the dashboard's pages, every job and every runner, each only to a
user who may read it (docs/design.md §17). One answer, read when the palette
first opens: two short queries however many runs there are (2,000 jobs are
some 60 KB of names and tags). A user whose roles are per project is
offered the jobs of those projects and the pages that open to it."""

from typing import Any

from django.urls import reverse

from dashboard import seen
from runners.models import Runner

# (title, URL name) of the pages offered, in the nav's order; each is
# offered to whom its view opens (`needed_permissions`, dashboard.views).
PAGES = [
    ("Overview", "dashboard:overview"),
    ("Checks", "dashboard:checks"),
    ("Runners", "dashboard:runners"),
    ("Capacity", "dashboard:capacity"),
    ("Alerts", "dashboard:alerts"),
    ("Dead letters", "dashboard:dead-letters"),
    ("Audit", "dashboard:audit"),
]
# Where a job's and a runner's entries lead, `NAME` standing for the name:
# the script fills it in, so the answer does not repeat a path per row.
NAME = "__name__"


def entries(user: Any) -> dict[str, Any]:
    """{"pages": [{name, url}], "jobs": [{name, tags}], "runners": [{name}],
    "urls": {"job", "runner"}} of what `user` may read."""
    shown = seen.pages_open(user, [url_name for _, url_name in PAGES])
    pages = [{"name": title, "url": reverse(name)} for title, name in PAGES if name in shown]
    pages.append({"name": "Admin", "url": reverse("admin:index")})
    jobs, runners = [], []
    if seen.opens(user, ("scheduler.view_job",)):
        rows = seen.jobs(user).order_by("name").values_list("name", "tags")
        jobs = [{"name": name, "tags": tags or []} for name, tags in rows]
    if user.has_perm("runners.view_runner"):
        names = Runner.objects.order_by("name").values_list("name", flat=True)
        runners = [{"name": name} for name in names]
    return {
        "pages": pages,
        "jobs": jobs,
        "runners": runners,
        "urls": {
            "job": reverse("dashboard:job", args=[NAME]),
            "runner": reverse("dashboard:runners") + f"#runner-{NAME}",
        },
    }
