"""The users' own two-factor changes in the audit trail (docs/design.md
§11): `user.two_factor_on`, `user.two_factor_off`,
`user.recovery_codes_renewed`, and each `user.recovery_code_used` (a code
that stands in for a lost phone).

Apart from croniq_project.sign_in, which every process would otherwise
import at start for these receivers: its login form and views import
allauth's forms (about 50 ms of CPU), which only the web serves.
"""

from typing import Any

from allauth.mfa import signals
from allauth.mfa.models import Authenticator

import audit


def audit_two_factor() -> None:
    """Record the users' own two-factor changes in the audit trail (an
    admin's removal of an authenticator is audited by croniq_project.admin)."""
    signals.authenticator_added.connect(on_added, dispatch_uid="croniq.two_factor_on")
    signals.authenticator_removed.connect(on_removed, dispatch_uid="croniq.two_factor_off")
    signals.authenticator_reset.connect(on_reset, dispatch_uid="croniq.recovery_codes_renewed")
    signals.authenticator_used.connect(on_used, dispatch_uid="croniq.recovery_code_used")


def record(action: str, user: Any, authenticator: Authenticator) -> None:
    audit.record(action, target=user, actor=user, data={"type": authenticator.type})


def on_added(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.TOTP:
        record("user.two_factor_on", user, authenticator)


def on_removed(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.TOTP:
        record("user.two_factor_off", user, authenticator)


def on_reset(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    record("user.recovery_codes_renewed", user, authenticator)


def on_used(sender: Any, user: Any, authenticator: Authenticator, **kwargs: Any) -> None:
    if authenticator.type == Authenticator.Type.RECOVERY_CODES:
        record("user.recovery_code_used", user, authenticator)
