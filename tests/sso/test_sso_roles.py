"""The roles claim read as Croniq grants (croniq_project/sso_roles.py),
without a database: what each shape of claim grants where the projects
`default` and `payroll` exist."""

import pytest

from croniq_project.sso_roles import Grant, grant

PROJECTS = ("default", "payroll")


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (None, Grant((), False)),
        ({"croniq:admin": True}, Grant((), False)),
        ("croniq:default:viewer", Grant((("default", "viewer"),), False)),
        (["croniq:default:operator", 42, None], Grant((("default", "operator"),), False)),
        ("croniq:payroll:editor", Grant((("payroll", "editor"),), False)),
        # Several roles in one project: the highest; one per project.
        (
            ["croniq:default:editor", "croniq:default:viewer", "croniq:payroll:admin"],
            Grant((("default", "editor"), ("payroll", "admin")), False),
        ),
        (["/croniq:admin", " croniq:default:viewer "], Grant((("default", "viewer"),), True)),
        (["admins", "croniq-admin", "CRONIQ:admin"], Grant((), False)),
        (
            ["croniq:nowhere:admin", "croniq:default:owner", "croniq:default"],
            Grant((), False, ("croniq:nowhere:admin", "croniq:default:owner", "croniq:default")),
        ),
    ],
)
def test_what_a_claim_grants(claim, expected):
    assert grant(claim, PROJECTS) == expected


def test_a_grant_of_nothing_is_no_role():
    assert not Grant((), False).any
    assert Grant((), True).any
    assert Grant((("default", "viewer"),), False).any
