"""The email channel through Django's SMTP backend to a real aiosmtpd server."""

import email
import socket
import time
from email import policy

import django
import pytest
from aiosmtpd.controller import Controller

from core import mail
from harness.processes import free_port
from notifications import channels, payloads
from tests.notifications.conftest import NOW

TO = {"to": ["ops@example.com", "oncall@team-a.example.org"]}


class Inbox:
    """Accepts every message, or refuses at RCPT or DATA with `refusal`."""

    def __init__(self, refuse_at=None, refusal="550 5.1.1 mailbox unavailable"):
        self.envelopes = []
        self.refuse_at = refuse_at
        self.refusal = refusal

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if self.refuse_at == "RCPT":
            return self.refusal
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.refuse_at == "DATA":
            return self.refusal
        self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


def smtp_server_at(settings, port, timeout=None):
    """Point the email channel at the SMTP server on 127.0.0.1:`port` (its
    configured `timeout` in seconds, if given): in MAILERS on Django 6.1
    (core/mail.py), in the EMAIL_* settings before."""
    if django.VERSION >= (6, 1):
        server = {"host": "127.0.0.1", "port": port, "use_tls": False, "use_ssl": False}
        if timeout is not None:
            server["timeout"] = timeout
        settings.MAILERS = {"default": {"BACKEND": mail.SMTP_BACKEND, "OPTIONS": server}}
        return
    settings.EMAIL_BACKEND = mail.SMTP_BACKEND
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    if timeout is not None:
        settings.EMAIL_TIMEOUT = timeout


@pytest.fixture
def smtp(settings):
    """Start an SMTP server for an Inbox and point Django's SMTP backend at it."""
    controllers = []

    def start(inbox):
        controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
        controller.start()
        controllers.append(controller)
        smtp_server_at(settings, controller.port)
        settings.DEFAULT_FROM_EMAIL = "Croniq <croniq@example.com>"
        return inbox

    yield start
    for controller in controllers:
        controller.stop()


def received(inbox):
    [envelope] = inbox.envelopes
    return envelope, email.message_from_bytes(envelope.original_content, policy=policy.default)


def subject_of(mail):
    # Django folds the Subject onto a continuation line; the parser keeps the
    # fold's leading space, which mail clients drop.
    return str(mail["Subject"]).lstrip()


def body_of(mail):
    return mail.get_content().replace("\r\n", "\n")


def test_the_email_reaches_the_server_with_subject_body_and_link(smtp, message):
    inbox = smtp(Inbox())
    started = time.perf_counter()  # the clock the latency is read on
    result = channels.send("email", TO, message, now=NOW)
    took = time.perf_counter() - started

    assert result.ok and result.error == "" and 0 < result.latency <= took  # in seconds
    envelope, mail = received(inbox)
    assert envelope.mail_from == "croniq@example.com"
    assert envelope.rcpt_tos == TO["to"]
    assert subject_of(mail) == "[Croniq] billing-sync failed 3 times in a row"
    assert mail["From"] == "Croniq <croniq@example.com>"
    assert mail["To"] == "ops@example.com, oncall@team-a.example.org"
    assert mail["Croniq-Event"] == "execution.given_up"
    assert mail["Croniq-Delivery"] == message["id"]
    assert mail["Message-ID"] == f"<croniq.{message['id']}@example.com>"
    assert mail.get_content_type() == "text/plain"
    lines = body_of(mail).splitlines()
    assert lines[0] == "billing-sync failed 3 times in a row"
    assert "attempt 1: exit code 2" in lines and "attempt 2: exit code 2" in lines
    assert "Event: execution.given_up at 2026-03-02T03:00:12Z" in lines
    assert "Job: billing-sync (owner: team-a; labels: linux, db)" in lines
    assert (
        "Execution 4711: state failed, scheduled for 2026-03-02T03:00:00Z, attempt 3,"
        " exit code 2, took 12.5 s"
    ) in lines
    assert "Runner: build-3" in lines
    assert "Open in Croniq: https://croniq.example.com/dashboard/jobs/billing-sync" in lines


def test_a_minimal_message_has_only_the_summary_event_and_link(smtp, message):
    inbox = smtp(Inbox())
    for key in ("job", "execution", "runner", "details", "at"):
        del message[key]
    message["event"] = "scheduler.stalled"
    message["summary"] = "No scheduler tick for 2 minutes"
    assert channels.send("email", {"to": ["ops@example.com"]}, message, now=NOW).ok
    _, mail = received(inbox)
    body = body_of(mail)
    assert body.startswith("No scheduler tick for 2 minutes\n\nEvent: scheduler.stalled\n\n")
    assert f"Open in Croniq: {message['url']}" in body
    assert "Job:" not in body and "Runner:" not in body


def test_a_long_or_multiline_summary_gives_one_short_subject_line(smtp, message):
    inbox = smtp(Inbox())
    message["summary"] = "12 jobs needing linux,db failed in 5 min,\nlast runner: build-3 " + (
        "and then some more words " * 10
    )
    assert channels.send("email", TO, message, now=NOW).ok
    _, mail = received(inbox)
    subject = subject_of(mail)
    assert subject.startswith("[Croniq] 12 jobs needing linux,db failed in 5 min, last runner")
    assert subject.endswith("…") and len(subject) <= payloads.SUBJECT_LIMIT
    assert "\n" not in subject
    assert not subject[:-1].endswith(" ")


def test_a_non_ascii_summary_survives(smtp, message):
    inbox = smtp(Inbox())
    message["summary"] = "Überweisungen-Export fehlgeschlagen ✗"
    assert channels.send("email", TO, message, now=NOW).ok
    _, mail = received(inbox)
    assert subject_of(mail) == "[Croniq] Überweisungen-Export fehlgeschlagen ✗"
    assert body_of(mail).startswith("Überweisungen-Export fehlgeschlagen ✗\n")


def test_a_refused_recipient_is_not_delivered(smtp, message):
    inbox = smtp(Inbox(refuse_at="RCPT"))
    result = channels.send("email", {"to": ["ghost@example.com"]}, message, now=NOW)
    assert not result.ok
    assert result.status_code == 550
    assert result.error == "SMTP 550: refused ghost@example.com: 5.1.1 mailbox unavailable"
    assert inbox.envelopes == []


def test_a_message_refused_at_data_is_not_delivered(smtp, message):
    inbox = smtp(Inbox(refuse_at="DATA", refusal="554 5.7.1 rejected as spam"))
    result = channels.send("email", TO, message, now=NOW)
    assert not result.ok
    assert (result.status_code, result.error) == (554, "SMTP 554: 5.7.1 rejected as spam")
    assert inbox.envelopes == []


def test_no_smtp_server_is_a_refused_connection(settings, message, closed_port):
    smtp_server_at(settings, closed_port)
    result = channels.send("email", TO, message, now=NOW)
    assert result == channels.Result(False, None, "connection refused", result.latency)


def test_a_silent_smtp_server_times_out(settings, message):
    # Accepts the connection (the kernel's backlog) and never greets: only
    # the call's timeout ends the wait, not the server's configured one.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        smtp_server_at(settings, silent.getsockname()[1], timeout=60)
        assert mail.configured_timeout() == 60
        started = time.monotonic()
        result = channels.send("email", TO, message, now=NOW, timeout=0.4)
        took = time.monotonic() - started
    assert not result.ok and result.error == "timed out after 0.4s"
    assert 0.4 <= took < 60 / 2


def test_email_message_builds_without_sending(message):
    mail = payloads.email_message(TO, message, "alerts@croniq.example.org")
    assert mail.subject == "[Croniq] billing-sync failed 3 times in a row"
    assert mail.to == TO["to"] and mail.from_email == "alerts@croniq.example.org"
    assert mail.extra_headers["Message-ID"] == f"<croniq.{message['id']}@croniq.example.org>"
    assert message["url"] in mail.body
