"""Signed webhooks reach a real HTTP receiver, which checks them as docs/design.md §9 says."""

import base64
import json
import time
from datetime import timedelta

import pytest
import requests

from notifications import channels, payloads
from tests.notifications.conftest import HANG, NOW

SECRET = "whsec-0123456789"


@pytest.fixture(autouse=True)
def environment(monkeypatch):
    monkeypatch.setenv("CRONIQ_SECRET_HOOK", SECRET)
    monkeypatch.setenv("CRONIQ_SECRET_HOOK_TOKEN", "T0K3N-abcdef")
    monkeypatch.delenv("CRONIQ_SECRET_NOT_SET", raising=False)


def signed(receiver, **config):
    return {"url": receiver.url, "secret": "${CRONIQ_SECRET_HOOK}", **config}


def test_a_signed_delivery_reaches_the_receiver_and_verifies(receiver, message):
    receiver.secret = SECRET
    started = time.perf_counter()  # the clock the latency is read on
    result = channels.send("webhook", signed(receiver), message, now=NOW)
    took = time.perf_counter() - started

    assert result.ok and result.status_code == 200 and result.error == ""
    assert 0 < result.latency <= took  # in seconds, the request's own
    [(path, headers, body)] = receiver.received
    assert path == "/hook"
    assert json.loads(body) == message
    assert body == json.dumps(message, separators=(",", ":")).encode()
    assert headers["Content-Type"] == "application/json"
    assert headers["Croniq-Event"] == "execution.given_up"
    assert headers["Croniq-Delivery"] == message["id"]
    assert headers["User-Agent"].startswith("croniq/")
    signature = headers["Croniq-Signature"]
    assert signature.startswith(f"t={int(NOW.timestamp())},v1=")
    assert channels.verify(SECRET, signature, body, now=NOW)


def test_a_tampered_body_is_refused_by_the_receiver(receiver, message):
    receiver.secret = SECRET
    assert channels.send("webhook", signed(receiver), message, now=NOW).ok
    [(_, headers, body)] = receiver.received

    tampered = body.replace(b"billing-sync", b"billing-sink")
    assert tampered != body
    replayed = requests.post(receiver.url, data=tampered, headers=headers, timeout=5)
    assert (replayed.status_code, replayed.text) == (401, "bad signature")
    unsigned = channels.send("webhook", {"url": receiver.url}, message, now=NOW)
    assert (unsigned.ok, unsigned.error) == (False, "HTTP 401")
    wrong = {"url": receiver.url, "secret": "${CRONIQ_SECRET_HOOK_TOKEN}"}
    assert channels.send("webhook", wrong, message, now=NOW).status_code == 401
    stale = channels.send("webhook", signed(receiver), message, now=NOW - timedelta(minutes=10))
    assert stale.status_code == 401


def test_a_tampered_body_or_a_wrong_secret_fails_verification(receiver, message):
    channels.send("webhook", signed(receiver), message, now=NOW)
    [(_, headers, body)] = receiver.received
    signature = headers["Croniq-Signature"]

    tampered = body.replace(b"billing-sync", b"billing-sink")
    assert not channels.verify(SECRET, signature, tampered, now=NOW)
    assert not channels.verify("another-secret", signature, body, now=NOW)
    assert not channels.verify(SECRET, signature.replace("t=", "t=1"), body, now=NOW)
    assert not channels.verify(SECRET, "", body, now=NOW)
    assert not channels.verify(SECRET, "t=soon,v1=abc", body, now=NOW)


def test_a_stale_signature_is_refused(receiver, message):
    channels.send("webhook", signed(receiver), message, now=NOW)
    [(_, headers, body)] = receiver.received
    signature = headers["Croniq-Signature"]

    assert channels.verify(SECRET, signature, body, now=NOW + timedelta(seconds=300))
    assert not channels.verify(SECRET, signature, body, now=NOW + timedelta(seconds=301))
    assert not channels.verify(SECRET, signature, body, now=NOW - timedelta(seconds=301))
    assert channels.verify(SECRET, signature, body, now=NOW + timedelta(hours=1), tolerance=3600)


def test_a_rotated_secret_verifies_with_either_signature(message):
    body = payloads._json(message)
    old = channels.sign("old-secret", NOW, body)
    new = channels.sign("new-secret", NOW, body)
    both = f"{old},{new.split(',')[1]}"
    assert channels.verify("old-secret", both, body, now=NOW)
    assert channels.verify("new-secret", both, body, now=NOW)
    assert not channels.verify("third-secret", both, body, now=NOW)


def test_sign_matches_the_documented_formula():
    import hashlib
    import hmac

    expected = hmac.new(b"k", b"1700000000." + b'{"a":1}', hashlib.sha256).hexdigest()
    assert channels.sign("k", 1700000000, b'{"a":1}') == f"t=1700000000,v1={expected}"


def test_the_body_is_the_same_bytes_on_every_retry_and_only_t_moves(receiver, message):
    config = signed(receiver)
    first, first_headers = payloads.render("webhook", config, message, now=NOW)
    again, again_headers = payloads.render("webhook", config, message, now=NOW + timedelta(1))
    assert first == again
    assert first_headers["Croniq-Delivery"] == again_headers["Croniq-Delivery"]
    assert first_headers["Croniq-Signature"] != again_headers["Croniq-Signature"]


def test_without_a_secret_there_is_no_signature(receiver, message):
    assert channels.send("webhook", {"url": receiver.url}, message, now=NOW).ok
    [(_, headers, _)] = receiver.received
    assert "Croniq-Signature" not in headers


def test_references_in_the_url_and_headers_are_expanded_at_delivery(receiver, message):
    config = signed(
        receiver,
        url=receiver.url + "?token=${CRONIQ_SECRET_HOOK_TOKEN}",
        headers={"Authorization": "Bearer ${CRONIQ_SECRET_HOOK_TOKEN}", "X-Team": "team-a"},
    )
    assert channels.send("webhook", config, message, now=NOW).ok
    [(path, headers, _)] = receiver.received
    assert path == "/hook?token=T0K3N-abcdef"
    assert headers["Authorization"] == "Bearer T0K3N-abcdef"
    assert headers["X-Team"] == "team-a"
    assert (
        config["headers"]["Authorization"] == "Bearer ${CRONIQ_SECRET_HOOK_TOKEN}"
    )  # never stored resolved


@pytest.mark.parametrize("status", [201, 202, 204])
def test_any_2xx_is_delivered(receiver, message, status):
    receiver.status, receiver.reply = status, b""
    result = channels.send("webhook", signed(receiver), message, now=NOW)
    assert result.ok and result.status_code == status


def test_a_receiver_answering_500_is_not_delivered_and_its_answer_is_not_kept(receiver, message):
    # The answer could be an internal service's page: those who read the
    # delivery log see the status only.
    receiver.status = 500
    receiver.reply = b"Internal error:   database\n down " + b"x" * 1000
    result = channels.send("webhook", signed(receiver), message, now=NOW)
    assert not result.ok
    assert (result.status_code, result.error) == (500, "HTTP 500")
    assert len(receiver.received) == 1


def test_a_redirect_is_not_followed(receiver, message):
    receiver.status = 301
    result = channels.send("webhook", signed(receiver), message, now=NOW)
    assert not result.ok and result.status_code == 301
    assert "not followed" in result.error
    assert len(receiver.received) == 1


def test_a_hanging_receiver_times_out_within_the_timeout(receiver, message):
    receiver.hang = True
    started = time.perf_counter()
    result = channels.send("webhook", signed(receiver, timeout=0.5), message, now=NOW)
    elapsed = time.perf_counter() - started
    assert not result.ok and result.status_code is None
    assert result.error == "timed out after 0.5s"
    # The receiver holds the request for a minute (then hangs up, another
    # error): only the timeout ends the call, not before it.
    assert 0.5 <= result.latency <= elapsed < HANG / 2


def test_the_callers_timeout_wins_over_the_channels(receiver, message):
    receiver.hang = True
    started = time.monotonic()
    result = channels.send("webhook", signed(receiver, timeout=30), message, now=NOW, timeout=0.3)
    assert result.error == "timed out after 0.3s"
    assert time.monotonic() - started < 30 / 2  # not the channel's 30 s


def test_a_refused_connection_is_a_result(closed_port, message):
    config = {
        "url": f"http://127.0.0.1:{closed_port}/hook",
        "secret": "${CRONIQ_SECRET_HOOK}",
        "timeout": 60,
    }
    result = channels.send("webhook", config, message, now=NOW)
    assert result == channels.Result(False, None, "connection refused", result.latency)
    assert result.latency < config["timeout"] / 2  # refused at once, not timed out


def test_secrets_stay_out_of_the_error_text(receiver, message):
    receiver.status = 403
    receiver.reply = b"bad token T0K3N-abcdef"
    config = signed(receiver, headers={"Authorization": "Bearer ${CRONIQ_SECRET_HOOK_TOKEN}"})
    result = channels.send("webhook", config, message, now=NOW)
    assert result.error == "HTTP 403"


def test_an_unset_secret_raises_and_sends_nothing(receiver, message):
    config = {"url": receiver.url, "secret": "${CRONIQ_SECRET_NOT_SET}"}
    with pytest.raises(ValueError, match=r"^secret: \$\{CRONIQ_SECRET_NOT_SET\} is not set"):
        channels.send("webhook", config, message, now=NOW)
    assert receiver.received == []


def test_a_secret_read_from_a_file_signs(receiver, message, tmp_path, settings):
    settings.CRONIQ_SECRETS_DIR = str(tmp_path)
    (tmp_path / "hook-secret").write_text("from-a-file\n")
    config = {"url": receiver.url, "secret": f"file:{tmp_path / 'hook-secret'}"}
    assert channels.send("webhook", config, message, now=NOW).ok
    [(_, headers, body)] = receiver.received
    assert channels.verify("from-a-file", headers["Croniq-Signature"], body, now=NOW)


def test_a_message_without_its_required_keys_is_refused(receiver):
    with pytest.raises(ValueError, match="^message: missing summary, url$"):
        channels.send("webhook", {"url": receiver.url}, {"id": "1", "event": "x"}, now=NOW)
    assert receiver.received == []


# -- the environment requests honours ----------------------------------------


@pytest.fixture
def plain_environment(monkeypatch, tmp_path):
    """No proxy variable, no CA bundle, no .netrc: `channels` skips
    requests' reading of the environment. Each test adds one."""
    for name in channels.PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in (*channels.CA_BUNDLE_VARIABLES, "NETRC", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_a_proxy_in_the_environment_carries_the_delivery(
    receiver, message, plain_environment, monkeypatch
):
    config = {"url": "http://receiver.invalid/hook"}
    assert channels.send("webhook", config, message, now=NOW).error == (
        "cannot resolve the host name"
    )
    monkeypatch.setenv("HTTP_PROXY", receiver.url.removesuffix("/hook"))

    assert channels.send("webhook", config, message, now=NOW).ok
    [(path, _, body)] = receiver.received
    assert path == "http://receiver.invalid/hook"  # the proxy's form of a request
    assert json.loads(body) == message

    monkeypatch.setenv("NO_PROXY", "receiver.invalid")
    assert channels.send("webhook", config, message, now=NOW).error == (
        "cannot resolve the host name"
    )
    assert len(receiver.received) == 1


def test_a_netrc_of_the_receivers_host_authenticates_the_delivery(
    receiver, message, plain_environment
):
    netrc = plain_environment / ".netrc"
    netrc.write_text("machine 127.0.0.1 login croniq password n3trc-pass\n")
    netrc.chmod(0o600)

    assert channels.send("webhook", {"url": receiver.url}, message, now=NOW).ok
    [(_, headers, _)] = receiver.received
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"croniq:n3trc-pass").decode()


def test_a_ca_bundle_in_the_environment_is_the_one_https_uses(
    closed_port, message, plain_environment, monkeypatch
):
    # Nothing listens: the bundle is looked for before connecting.
    config = {"url": f"https://127.0.0.1:{closed_port}/hook"}
    assert channels.send("webhook", config, message, now=NOW).error == "connection refused"
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(plain_environment / "no-such-bundle.pem"))

    result = channels.send("webhook", config, message, now=NOW)
    assert not result.ok and result.error == "request failed: OSError"
