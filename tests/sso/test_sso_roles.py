"""The roles claim read as Croniq grants (croniq_project/sso_roles.py),
without a database: what each shape of claim grants."""

import pytest

from croniq_project.sso_roles import ADMINS, OPERATORS, VIEWERS, Grant, grant


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        (None, Grant(frozenset(), False)),
        ({"croniq:admin": True}, Grant(frozenset(), False)),
        ("croniq:default:viewer", Grant(frozenset({VIEWERS}), False)),
        (["croniq:default:operator", 42, None], Grant(frozenset({OPERATORS}), False)),
        ("croniq:default:editor", Grant(frozenset({OPERATORS}), False)),
        (
            ["croniq:default:editor", "croniq:default:admin"],
            Grant(frozenset({OPERATORS, ADMINS}), False),
        ),
        (["/croniq:admin", " croniq:default:viewer "], Grant(frozenset({VIEWERS}), True)),
        (["admins", "croniq-admin", "CRONIQ:admin"], Grant(frozenset(), False)),
        (
            ["croniq:payroll:admin", "croniq:default:owner", "croniq:default"],
            Grant(
                frozenset(),
                False,
                ("croniq:payroll:admin", "croniq:default:owner", "croniq:default"),
            ),
        ),
    ],
)
def test_what_a_claim_grants(claim, expected):
    assert grant(claim) == expected


def test_a_grant_of_nothing_is_no_role():
    assert not Grant(frozenset(), False).any
    assert Grant(frozenset(), True).any
    assert Grant(frozenset({VIEWERS}), False).any
