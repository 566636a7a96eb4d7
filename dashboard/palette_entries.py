"""What the keyboard palette (`static/dashboard/palette.js`, Ctrl+K or "/")
jumps to: the dashboard's pages, every job and every runner, each only to a
user who may read it (docs/design.md §17). One answer, read when the palette
first opens: two short queries however many runs there are (2,000 jobs are
some 60 KB of names and tags)."""

from typing import Any

from django.urls import resolve, reverse

from runners.models import Runner
from scheduler.models import Job

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
    pages = []
    for title, url_name in PAGES:
        url = reverse(url_name)
        needed = getattr(resolve(url).func, "needed_permissions", ())
        if user.has_perms(needed):
            pages.append({"name": title, "url": url})
    pages.append({"name": "Admin", "url": reverse("admin:index")})
    jobs, runners = [], []
    if user.has_perm("scheduler.view_job"):
        rows = Job.objects.order_by("name").values_list("name", "tags")
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
