"""Projects in apply files (docs/design.md §11): `projects:` declares them,
`project:` puts the document's items in one, an item's own `project` wins;
an unknown project is refused naming the field; a caller bound to projects
(a key bound to one, a project editor) is refused the whole document when
any item or stored row it touches is elsewhere, and its prune never reaches
another project's rows."""

import datetime as dt
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from calendars.models import Calendar
from checks.models import Check
from notifications.models import Channel, Rule
from projects.models import Project
from scheduler.apply import document as applyfile
from scheduler.apply.document import ApplyError
from scheduler.models import ConcurrencyGroup, Job
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.UTC)
TEAM_A = {
    "projects": [{"name": "team-a", "description": "Billing"}],
    "project": "team-a",
    "calendars": [{"name": "workdays", "weekdays": ["mon", "tue", "wed", "thu", "fri"]}],
    "concurrency_groups": [{"name": "db", "max_concurrent": 2}],
    "jobs": [
        {"name": "invoice", "schedule": "0 6 * * *", "command": "true", "calendar": "workdays"},
        {"name": "shared", "schedule": "0 7 * * *", "command": "true", "project": "default"},
    ],
    "checks": [{"name": "backup", "period": "1h"}],
    "channels": [{"name": "ops", "kind": "webhook", "url": "https://hooks.example/x"}],
    "notify": [{"name": "failures", "events": ["execution.failed"], "channels": ["ops"]}],
}


def apply(document, **options):
    return applyfile.apply(document, now=NOW, source="test", managed_source="test", **options)


def projects_of(model):
    return dict(model.objects.values_list("name", "project"))


def snapshot():
    return [
        sorted(model.objects.values_list("name", "project", "updated_at"))
        for model in (Job, Calendar, ConcurrencyGroup, Check, Channel, Rule)
    ] + [sorted(Project.objects.values_list("name", "description"))]


def test_a_document_declares_a_project_and_puts_its_items_in_it():
    changes = apply(TEAM_A)
    assert Project.objects.get(name="team-a").description == "Billing"
    assert ("create", "project", "team-a") in {(c.action, c.kind, c.name) for c in changes}
    assert projects_of(Job) == {"invoice": "team-a", "shared": "default"}  # its own wins
    for model in (Calendar, ConcurrencyGroup, Check, Channel, Rule):
        assert set(projects_of(model).values()) == {"team-a"}, model
    # Applied again: nothing changes.
    assert {c.action for c in apply(TEAM_A)} == {"unchanged"}


def test_moving_a_row_to_another_project_is_a_change_of_its_project():
    apply(TEAM_A)
    moved = {**TEAM_A, "jobs": [{**TEAM_A["jobs"][0], "project": "default"}, TEAM_A["jobs"][1]]}
    [change] = [c for c in apply(moved) if c.name == "invoice"]
    assert change.action == "update" and change.diff["project"] == ["team-a", "default"]
    assert Job.objects.get(name="invoice").project == "default"


@pytest.mark.parametrize(
    "document, error",
    [
        ({"project": "nowhere", "jobs": []}, "project: no project named 'nowhere'"),
        (
            {"jobs": [{"name": "x", "schedule": "@daily", "command": "true", "project": "nope"}]},
            "jobs[0].project: no project named 'nope'",
        ),
        (
            {"calendars": [{"name": "c", "project": "Not A Slug"}]},
            "calendars[0].project: expected a project's name",
        ),
        ({"projects": [{"name": "bad name"}]}, "projects[0].name: 'bad name' is not a name"),
        ({"projects": [{"name": "p", "owner": "x"}]}, "projects[0]: unknown field(s): owner"),
    ],
)
def test_an_unknown_or_bad_project_is_refused_naming_the_field(document, error):
    before = snapshot()
    with pytest.raises(ApplyError) as refused:
        apply(document)
    assert any(e.startswith(error) for e in refused.value.errors), refused.value.errors
    assert snapshot() == before


def test_a_caller_bound_to_a_project_is_refused_any_other_whole():
    apply(TEAM_A)
    Project.objects.create(name="team-b")
    JobFactory(name="theirs", project="team-b", managed_by="apply", managed_source="test")
    before = snapshot()
    elsewhere = {
        "project": "team-a",
        "jobs": [
            {"name": "fine", "schedule": "@daily", "command": "true"},
            {"name": "other", "schedule": "@daily", "command": "true", "project": "team-b"},
        ],
    }
    with pytest.raises(ApplyError) as refused:
        apply(elsewhere, projects={"team-a"})
    # Another project does not exist for it: its name never shows as forbidden.
    assert "jobs[1].project: no project named 'team-b'" in refused.value.errors
    taken = {
        "project": "team-a",
        "jobs": [{"name": "theirs", "schedule": "@daily", "command": "x"}],
    }
    with pytest.raises(ApplyError) as refused:
        apply(taken, projects={"team-a"})
    assert refused.value.errors == ["jobs[0].name: 'theirs' is taken"]
    with pytest.raises(ApplyError) as refused:
        apply({"projects": [{"name": "team-c"}]}, projects={"team-a"})
    assert refused.value.errors == [
        "projects[0]: only a global key or a superuser declares projects"
    ]
    assert snapshot() == before


def test_a_bound_prune_leaves_other_projects_rows_of_the_same_source():
    apply(TEAM_A)
    Project.objects.create(name="team-b")
    JobFactory(name="theirs", project="team-b", managed_by="apply", managed_source="test")
    apply({"project": "team-a", "jobs": []}, projects={"team-a"}, prune=True)
    assert projects_of(Job) == {"theirs": "team-b", "shared": "default"}  # team-a's pruned


def test_the_apply_command_reads_projects(tmp_path):
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(TEAM_A))
    call_command("apply", str(path), stdout=StringIO(), stderr=StringIO())
    assert projects_of(Job)["invoice"] == "team-a"


def test_an_export_puts_each_row_back_in_its_project(tmp_path):
    apply(TEAM_A)
    out = StringIO()
    call_command("export", stdout=out, stderr=StringIO())
    document = yaml.safe_load(out.getvalue())
    assert document["projects"] == [{"name": "team-a", "description": "Billing"}]
    jobs = {job["name"]: job for job in document["jobs"]}
    assert jobs["invoice"]["project"] == "team-a" and "project" not in jobs["shared"]
    for key in ("calendars", "concurrency_groups", "checks", "channels", "notify"):
        assert {item.get("project") for item in document[key]} == {"team-a"}, key
    # Applied to an empty database, it makes the same rows in the same projects.
    before = {model: projects_of(model) for model in (Job, Calendar, Check, Channel, Rule)}
    for model in (Rule, Channel, Check, Job, ConcurrencyGroup, Calendar, Project):
        model.objects.all().delete()
    applyfile.apply(document, now=NOW, source="restore")
    assert {model: projects_of(model) for model in before} == before


def test_an_export_of_one_project_holds_its_rows_alone():
    apply(TEAM_A)
    out = StringIO()
    call_command("export", "--project", "team-a", stdout=out, stderr=StringIO())
    document = yaml.safe_load(out.getvalue())
    assert document["project"] == "team-a"
    assert [job["name"] for job in document["jobs"]] == ["invoice"]
    with pytest.raises(CommandError, match="--project: no project named 'nope'"):
        call_command("export", "--project", "nope", stdout=StringIO(), stderr=StringIO())


def test_a_bound_caller_cannot_name_another_projects_calendar_or_group():
    Project.objects.create(name="team-b")
    apply({"project": "team-b", "calendars": [{"name": "b-days"}], "concurrency_groups": [
        {"name": "b-pool", "max_concurrent": 1}
    ]})  # fmt: skip
    apply({"projects": [{"name": "team-a"}]})
    job = {"name": "mine", "schedule": "@daily", "command": "true", "calendar": "b-days"}
    pooled = {
        "name": "pooled",
        "schedule": "@daily",
        "command": "true",
        "concurrency_group": "b-pool",
    }
    with pytest.raises(ApplyError) as refused:
        apply({"project": "team-a", "jobs": [job, pooled]}, projects={"team-a"})
    assert refused.value.errors == [
        "jobs[0].calendar: no calendar named 'b-days'",
        "jobs[1].concurrency_group: no concurrency group named 'b-pool'",
    ]
    assert not Job.objects.exists()


def test_a_job_reads_the_secrets_of_its_own_project_alone():
    from vault import store

    apply({"projects": [{"name": "team-a"}, {"name": "team-b"}]})
    store.put("token", "b-value-1234", project="team-b", actor=("user", "test"), now=NOW)
    job = {"name": "j", "schedule": "@daily", "command": "true", "env": {"T": "${secret:token}"}}
    with pytest.raises(ApplyError) as refused:
        apply({"project": "team-a", "jobs": [job]})
    assert refused.value.errors[0].startswith("jobs[0].env.T: ")
    apply({"project": "team-b", "jobs": [job]})
    assert Job.objects.get(name="j").project == "team-b"


def test_a_bound_callers_rule_cannot_send_to_another_projects_channel():
    apply({"projects": [{"name": "team-a"}, {"name": "team-b"}]})
    apply({"project": "team-b", "channels": [TEAM_A["channels"][0]]})
    rule = {"name": "mine", "events": ["execution.failed"], "channels": ["ops"]}
    with pytest.raises(ApplyError) as refused:
        apply({"project": "team-a", "notify": [rule]}, projects={"team-a"})
    assert refused.value.errors == ["notify[0].channels: unknown channel 'ops'"]
    assert not Rule.objects.exists()
