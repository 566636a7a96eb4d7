"""The admin's channel, rule and mute forms: plain text where people type
(addresses separated by commas, one "Name: value" header per line, "30m"),
checked with the apply file's checks (`notifications.applyitems`) so the
admin and `manage.py apply` refuse the same things with the same words."""

from datetime import datetime
from typing import Any

from django import forms
from django.utils import timezone

from notifications import applyitems, channel_config
from notifications.models import Channel, Mute, Rule
from scheduler.admin.forms import checked
from scheduler.runs.events import NAMES

# The settings of each kind the channel form sends to `channel_config.validate`;
# `timeout` and `format` always hold a value, so they count only where they apply.
KIND_FIELDS = {
    Channel.EMAIL: ("to", "url", "secret", "headers", "username"),
    Channel.WEBHOOK: ("to", "url", "secret", "headers", "timeout", "username"),
    Channel.SLACK: ("to", "url", "secret", "headers", "format", "timeout", "username"),
}


def comma_list(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").replace("\n", ",").split(",") if part.strip()]


class ChannelForm(forms.ModelForm):
    to = forms.CharField(
        required=False,
        help_text="Email channels: addresses separated by commas, e.g. "
        "ops@example.com, oncall@example.com.",
    )
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='Webhook channels: extra HTTP headers, one "Name: value" per line; '
        'values may use ${CRONIQ_SECRET_NAME}, e.g. "Authorization: Bearer '
        '${CRONIQ_SECRET_HOOK_TOKEN}".',
    )

    class Meta:
        model = Channel
        fields = [
            "name", "kind", "enabled", "to", "url", "secret", "headers", "format", "timeout",
            "username",
        ]  # fmt: skip
        help_texts = {
            "name": "How rules and the apply file name this channel, e.g. ops-mail.",
            "kind": "Email, a signed JSON webhook, or a chat webhook (Slack and the like).",
            "url": "Webhook and chat channels: where to POST. A chat webhook URL is itself "
            "a secret: write it as file:/run/secrets/slack or ${CRONIQ_SECRET_SLACK_URL}. "
            "Private, loopback and link-local addresses are refused unless "
            "CRONIQ_NOTIFY_ALLOW_NETS lists them.",
            "secret": "Webhook channels: the HMAC signing secret as a reference, "
            "file:/run/secrets/hook or ${CRONIQ_SECRET_HOOK}; never the secret itself.",
            "format": "Chat channels: the JSON the receiving chat speaks.",
            "timeout": "Webhook and chat channels: seconds a try may take in all (at most 60).",
            "username": "Chat channels (not Teams): the name messages are posted as, e.g. Croniq.",
            "enabled": "A disabled channel receives nothing.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "timeout" in self.fields:  # not when the form is only viewed
            self.fields["timeout"].required = False  # email channels have none
        if self.instance.pk:
            self.initial["to"] = ", ".join(self.instance.to)
            self.initial["headers"] = "\n".join(
                f"{name}: {value}" for name, value in self.instance.headers.items()
            )

    def clean_timeout(self) -> float:
        timeout = self.cleaned_data["timeout"]
        return channel_config.DEFAULT_TIMEOUT if timeout is None else timeout

    def clean_to(self) -> list[str]:
        return comma_list(self.cleaned_data["to"])

    def clean_headers(self) -> dict[str, str]:
        headers = {}
        for number, line in enumerate(self.cleaned_data["headers"].splitlines(), start=1):
            if not line.strip():
                continue
            name, colon, value = line.partition(":")
            if not colon or not name.strip():
                raise forms.ValidationError(f'line {number}: write "Name: value"')
            headers[name.strip()] = value.strip()
        return headers

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        kind = cleaned.get("kind")
        if kind not in KIND_FIELDS or any(f in self.errors for f in KIND_FIELDS[kind]):
            return cleaned
        config = applyitems.without_empty({f: cleaned.get(f) for f in KIND_FIELDS[kind]})
        for field, message in applyitems.channel_problems(kind, config).items():
            self.add_error(field if field in self.fields else None, message)
        return cleaned


class DurationField(forms.CharField):
    """Seconds, typed as "900" or "15m" (the apply file's durations)."""

    def prepare_value(self, value: Any) -> str:
        return "" if value is None else str(value)

    def clean(self, value: Any) -> int | None:
        text = super().clean(value).strip()
        if not text:
            return None
        return checked("duration", applyitems.seconds)(text)


class RuleForm(forms.ModelForm):
    events = forms.MultipleChoiceField(
        choices=[(name, name) for name in NAMES],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The events this rule routes.",
    )
    labels = forms.CharField(
        required=False,
        help_text="Only jobs (or runners) carrying all of these labels, separated by commas.",
    )
    failures_in_a_row = forms.IntegerField(
        initial=1, help_text="job.failing: notify when a job's failure streak reaches this."
    )
    slow_factor = forms.FloatField(
        required=False,
        help_text="job.slow: a run is slow past this many times the job's p95 duration "
        "(empty: the default factor).",
    )
    grace = DurationField(
        required=False,
        help_text="job.missed, labels.unserved, scheduler.stalled: how long before they count, "
        'in seconds or like "10m" (empty: the defaults).',
    )
    throttle = DurationField(
        required=False,
        initial=0,
        help_text='At most one notification per job within this, e.g. "30m"; what is held back '
        "is summed up in the next one. 0: no throttle.",
    )

    class Meta:
        model = Rule
        fields = [
            "name", "enabled", "events", "jobs", "checks", "labels", "owner", "calendar",
            "fallback",
            "failures_in_a_row", "slow_factor", "grace", "channels", "throttle", "digest",
        ]  # fmt: skip
        widgets = {"channels": forms.CheckboxSelectMultiple}
        help_texts = {
            "name": "How the apply file names this rule, e.g. failures.",
            "channels": "Where the notifications go: at least one channel.",
            "calendar": "Only jobs on this calendar.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "channels" in self.fields:  # not when the form is only viewed
            # Empty is refused below, with the apply file's words.
            self.fields["channels"].required = False
        if self.instance.pk:
            self.initial["labels"] = ", ".join(self.instance.labels)

    def clean_events(self) -> list[str]:
        return checked("events", applyitems.event_names)(self.cleaned_data["events"])

    def clean_labels(self) -> list[str]:
        return comma_list(self.cleaned_data["labels"])

    def clean_failures_in_a_row(self) -> int:
        value = self.cleaned_data["failures_in_a_row"]
        return checked("failures_in_a_row", lambda f, v: applyitems.count(f, v, least=1))(value)

    def clean_slow_factor(self) -> float | None:
        return checked("slow_factor", applyitems.factor)(self.cleaned_data["slow_factor"])

    def clean_throttle(self) -> int:
        return self.cleaned_data["throttle"] or 0

    def clean_channels(self) -> list[Channel]:
        channels = self.cleaned_data["channels"]
        if not channels:
            raise forms.ValidationError("a rule must route to at least one channel")
        return channels


class MuteForm(forms.ModelForm):
    class Meta:
        model = Mute
        fields = ["rule", "job", "until", "note"]
        help_texts = {
            "rule": "Mute this rule; leave rule and job empty to mute everything.",
            "job": "Mute this job's notifications.",
            "until": "When notifications resume.",
            "note": "Why, for whoever is on call next.",
        }

    def clean_until(self) -> datetime:
        until = self.cleaned_data["until"]
        if until <= timezone.now():
            raise forms.ValidationError("must be in the future")
        return until
