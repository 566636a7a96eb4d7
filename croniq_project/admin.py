"""allauth's models in the admin (croniq_project/sign_in.py).

Authenticators are listed without their data (a TOTP secret, the recovery
codes' seed): a superuser sees who has which and since when, and removes a
lost one (a TOTP authenticator takes its owner's recovery codes with it),
audited as `authenticator.deleted`; nobody adds or edits one here: its
owner enrols. The other allauth models have no admin until single sign-on
uses them: Croniq keeps no email addresses, and social accounts and their
tokens come with single sign-on.
"""

from allauth.account.models import EmailAddress
from allauth.mfa.base.internal.flows import delete_dangling_recovery_codes
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount, SocialApp, SocialToken
from django.contrib import admin
from django.db import models, transaction
from django.http import HttpRequest

from audit.audited_admin import AuditedModelAdmin

for model in (EmailAddress, SocialApp, SocialAccount, SocialToken, Authenticator):
    if admin.site.is_registered(model):
        admin.site.unregister(model)


@admin.register(Authenticator)
class AuthenticatorAdmin(AuditedModelAdmin):
    list_display = ["user", "type", "created_at", "last_used_at"]
    list_filter = ["type"]
    fields = ["user", "type", "created_at", "last_used_at"]
    readonly_fields = fields
    # The secret and the seed stay out of the audit trail too.
    audit_exclude = ("data",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: models.Model | None = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: Authenticator) -> None:
        with transaction.atomic():
            super().delete_model(request, obj)
            delete_dangling_recovery_codes(obj.user)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        users = {authenticator.user for authenticator in queryset}
        with transaction.atomic():
            super().delete_queryset(request, queryset)
            for user in users:
                delete_dangling_recovery_codes(user)
