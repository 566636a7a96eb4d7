"""`croniq` and projects (docs/design.md §11): the jobs table shows each
job's project, `jobs list --project` and the secrets commands' `--project`
ask the API for that project's."""

JOB = {
    "name": "salaries", "project": "payroll", "schedule": "0 6 * * *", "timezone": "UTC",
    "next_run_at": None, "paused": False, "enabled": True, "labels": [], "managed_by": "api",
}  # fmt: skip


def test_jobs_list_asks_for_one_projects_jobs_and_shows_the_project(api, croniq):
    api.answer(200, {"items": [JOB], "next_cursor": None})

    code, out, _ = croniq("jobs", "list", "--project", "payroll")

    assert code == 0
    assert out.splitlines() == [
        "NAME      PROJECT  SCHEDULE   TIMEZONE  NEXT RUN  STATUS   LABELS  MANAGED BY",
        "salaries  payroll  0 6 * * *  UTC                 enabled          api",
    ]
    assert api.asked[0].query == {"limit": "500", "project": "payroll"}


def test_jobs_list_without_a_project_asks_for_every_job_the_key_sees(api, croniq):
    api.answer(200, {"items": [], "next_cursor": None})

    assert croniq("jobs", "list") == (0, "no jobs\n", "")
    assert api.asked[0].query == {"limit": "500"}


def test_secrets_list_and_delete_name_the_project(api, croniq):
    api.answer(200, {"items": [], "next_cursor": None})
    api.answer(204)

    assert croniq("secrets", "list", "--project", "payroll")[0] == 0
    assert croniq("secrets", "delete", "db-password", "--project", "payroll") == (
        0, "secret db-password: deleted\n", "",
    )  # fmt: skip
    assert [(a.method, a.path, a.query) for a in api.asked] == [
        ("GET", "/api/v1/secrets", {"limit": "500", "project": "payroll"}),
        ("DELETE", "/api/v1/secrets/db-password", {"project": "payroll"}),
    ]


def test_a_project_the_key_does_not_reach_exits_1_with_the_detail(api, croniq):
    api.answer(404, {"detail": "project: no project named 'hr'"})

    code, out, err = croniq("secrets", "list", "--project", "hr")

    assert (code, out, err) == (1, "", "croniq: HTTP 404: project: no project named 'hr'\n")
