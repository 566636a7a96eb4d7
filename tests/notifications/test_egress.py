"""Where a channel may connect (no loopback, private or link-local receiver
unless allowed, checked on the address connected to) and how long one try
may take (the channel's timeout, however slowly the receiver answers)."""

import ipaddress
import socket
import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured

from croniq_project.env import envnetworks
from notifications import channels, delivery, egress
from notifications.models import Delivery, Notification
from tests.notifications.conftest import NOW
from tests.notifications.factories import notification, webhook

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8")]


@pytest.fixture
def nothing_allowed(settings):
    settings.CRONIQ_NOTIFY_ALLOW_NETS = []


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.1.2.3",
        "::1",
        "0.0.0.0",  # connecting to it reaches this machine
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # the cloud's metadata service
        "100.64.0.1",  # carrier-grade NAT
        "fe80::1",
        "fe80::1%eth0",
        "fd00::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "224.0.0.1",
    ],
)
def test_addresses_that_are_not_public_are_refused(address, nothing_allowed):
    reason = egress.refusal(address)
    assert reason and "CRONIQ_NOTIFY_ALLOW_NETS" in reason
    assert address not in reason


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700:4700::1111", "8.8.8.8"])
def test_public_addresses_are_allowed(address, nothing_allowed):
    assert egress.refusal(address) is None


def test_the_allow_list_lets_an_internal_receiver_through(settings):
    settings.CRONIQ_NOTIFY_ALLOW_NETS = [ipaddress.ip_network("10.20.0.0/16")]
    assert egress.refusal("10.20.3.4") is None
    assert egress.refusal("10.21.3.4") is not None
    assert egress.refusal("127.0.0.1") is not None


def test_the_allow_list_is_read_as_networks_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv("CRONIQ_NOTIFY_ALLOW_NETS", "10.20.0.0/16, fd00::/8,192.168.1.7")
    assert envnetworks("CRONIQ_NOTIFY_ALLOW_NETS") == [
        ipaddress.ip_network("10.20.0.0/16"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("192.168.1.7/32"),
    ]
    monkeypatch.setenv("CRONIQ_NOTIFY_ALLOW_NETS", "10.20.0.0/16, intranet")
    with pytest.raises(ImproperlyConfigured, match=r"^CRONIQ_NOTIFY_ALLOW_NETS: .*'intranet'"):
        envnetworks("CRONIQ_NOTIFY_ALLOW_NETS")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data/",
        "https://10.0.0.5/in",
    ],
)
def test_a_url_with_an_internal_address_is_refused_when_validated(url, nothing_allowed):
    problems = channels.validate("webhook", {"url": url})
    assert problems["url"].startswith("url: refused: the receiver's address is")
    assert "CRONIQ_NOTIFY_ALLOW_NETS" in problems["url"]


def test_a_url_with_a_host_name_is_checked_when_it_resolves(nothing_allowed):
    assert channels.validate("webhook", {"url": "http://localhost:9000/hook"}) == {}


# -- at delivery: the address connected to ----------------------------------------


def test_a_host_name_resolving_to_loopback_is_refused_at_delivery(
    receiver, message, nothing_allowed
):
    url = receiver.url.replace("127.0.0.1", "localhost")
    result = channels.send("webhook", {"url": url}, message, now=NOW)
    assert not result.ok and result.status_code is None
    assert result.error.startswith("refused: the receiver's address is a loopback address")
    assert receiver.received == []


def test_an_allowed_network_is_delivered_to(receiver, message, settings):
    settings.CRONIQ_NOTIFY_ALLOW_NETS = LOOPBACK
    url = receiver.url.replace("127.0.0.1", "localhost")
    assert channels.send("webhook", {"url": url}, message, now=NOW).ok
    assert len(receiver.received) == 1


def test_a_name_that_resolves_elsewhere_at_delivery_is_refused_then(
    receiver, message, nothing_allowed, monkeypatch
):
    """DNS rebinding: the name was public when the channel was saved; at
    delivery it answers 127.0.0.1. The check is on what is connected to."""
    port = receiver.server_address[1]
    config = {"url": f"http://rebind.example.com:{port}/hook"}
    resolve = socket.getaddrinfo

    def rebinding(host, *args, **kwargs):
        if host == "rebind.example.com":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        return resolve(host, *args, **kwargs)

    assert channels.validate("webhook", config) == {}
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    result = channels.send("webhook", config, message, now=NOW)
    assert result.error.startswith("refused: the receiver's address is a loopback address")
    assert receiver.received == []


def test_a_refused_delivery_is_recorded_with_its_reason(db, receiver, nothing_allowed):
    channel = webhook(receiver.url.replace("127.0.0.1", "localhost"), secret="")
    refused = notification(channel)
    delivery.deliver_due(NOW)
    refused.refresh_from_db()
    assert refused.state == Notification.PENDING and refused.attempts == 1
    [row] = Delivery.objects.filter(notification=refused)
    assert not row.ok and row.error.startswith("refused: the receiver's address is a loopback")
    assert receiver.received == []


# -- a deadline on the whole try ----------------------------------------------------


class Dripper:
    """A receiver that reads the request, then sends its answer's status
    line and headers one byte every `pace` seconds, for up to `limit`
    seconds: each read returns well inside any timeout."""

    ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"

    def __init__(self, pace=0.3, limit=10.0):
        self.pace, self.limit = pace, limit
        self.server = socket.create_server(("127.0.0.1", 0))
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.getsockname()[1]}/hook"

    def serve(self):
        connection, _ = self.server.accept()
        with connection:
            connection.recv(65536)
            ends = time.monotonic() + self.limit
            for byte in self.ANSWER:
                if self.stopping.wait(self.pace) or time.monotonic() > ends:
                    return
                try:
                    connection.sendall(bytes([byte]))
                except OSError:
                    return  # the sender gave up

    def close(self):
        self.stopping.set()
        self.thread.join(5)
        self.server.close()


@pytest.fixture
def dripper():
    # It drips for a minute: only the try's deadline ends a try sooner (each
    # read returns well inside any socket timeout).
    drip = Dripper(limit=60.0)
    yield drip
    drip.close()


def test_a_receiver_dripping_its_headers_is_cut_off_at_the_timeout(dripper, message):
    started = time.monotonic()
    result = channels.send("webhook", {"url": dripper.url, "timeout": 1.0}, message, now=NOW)
    took = time.monotonic() - started
    assert (result.ok, result.error) == (False, "timed out after 1.0s")
    assert 1.0 <= took < dripper.limit / 2, took


def test_a_dripping_receiver_s_try_is_recorded_as_a_timeout_within_its_lease(db, dripper):
    channel = webhook(dripper.url, secret="", timeout=1.0)
    slow = notification(channel)
    started = time.monotonic()
    delivery.deliver_due(NOW)
    took = time.monotonic() - started
    slow.refresh_from_db()
    # Cut by the try's deadline at its timeout, so inside its lease (the
    # timeout and a margin): the drip alone would have run for a minute.
    assert slow.last_error == "timed out after 1.0s" and slow.attempts == 1
    assert 1.0 <= took < dripper.limit / 2, took


def test_a_deadline_that_passed_shuts_a_socket_watched_afterwards():
    left, right = socket.socketpair()
    with left, right, egress.Deadline(60.0) as deadline:
        deadline.expire()  # what the timer does when the time is up
        deadline.watch(left)
        assert deadline.passed
        left.settimeout(1.0)
        assert left.recv(1) == b""  # shut down: no waiting for the peer
