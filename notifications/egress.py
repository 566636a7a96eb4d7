"""Where webhook and chat channels may connect, and for how long.

Whoever writes a channel chooses its URL, and a refused delivery's status
reaches the admin's message and the delivery log. So a channel must not
reach the machine's own services, the cloud's metadata address or the
internal network: a receiver on a private, loopback or link-local address
(or any address that is not global) is refused unless its network is listed
in CRONIQ_NOTIFY_ALLOW_NETS. The check runs on each address the host name
resolves to, just before connecting to that very address, and again on the
connected socket's peer: a name that resolves to a public address when the
channel is saved and to 127.0.0.1 at delivery (DNS rebinding) is refused
then. Through a proxy, the address connected to is the proxy's.

A try is bounded as a whole: the channel's timeout limits each socket read,
and a receiver that drips its answer a byte at a time would hold the try
(and a delivery worker) far longer, past the claim's lease. `Deadline`
shuts the try's sockets down when its time is up.
"""

import contextlib
import contextvars
import heapq
import ipaddress
import itertools
import socket
import threading
import time
from typing import Any

import requests
from django.conf import settings
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family

ALLOW_SETTING = "CRONIQ_NOTIFY_ALLOW_NETS"


class ForbiddenAddress(OSError):
    """The receiver's address is one a channel may not reach."""


def refusal(address: str, allowed: Any = None) -> str | None:
    """Why a channel may not connect to `address` (an IP as text), or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not the address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    networks = settings.CRONIQ_NOTIFY_ALLOW_NETS if allowed is None else allowed
    if any(ip in network for network in networks if network.version == ip.version):
        return None
    if ip.is_global and not ip.is_multicast:
        return None
    return (
        f"refused: the receiver's address is {_kind(ip)}; receivers on private, loopback "
        f"or link-local addresses need their network in {ALLOW_SETTING}"
    )


def _kind(ip) -> str:
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    return "not a public address"


def literal_refusal(host: str) -> str | None:
    """`refusal` of a URL's host when it is an IP address written out (a
    name is checked when it resolves, at delivery)."""
    try:
        return refusal(host.strip("[]"))
    except ValueError:
        return None  # a host name


def connect(
    address: tuple[str, int],
    timeout: float | None,
    source_address: tuple[str, int] | None = None,
    socket_options: list[Any] | None = None,
) -> socket.socket:
    """urllib3's create_connection, but each resolved address is checked
    before it is connected to, and the connected peer after."""
    host, port = address
    refused, failure = None, None
    infos = socket.getaddrinfo(host.strip("[]"), port, allowed_gai_family(), socket.SOCK_STREAM)
    for family, kind, proto, _, target in infos:
        reason = refusal(target[0])
        if reason:
            refused = reason
            continue
        sock = socket.socket(family, kind, proto)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.settimeout(_connect_timeout(timeout))
            if source_address:
                sock.bind(source_address)
            sock.connect(target)
            peer = refusal(sock.getpeername()[0])
            if peer:
                raise ForbiddenAddress(peer)
            return sock
        except OSError as error:
            sock.close()
            if isinstance(error, ForbiddenAddress):
                raise
            failure = error
    if failure is not None:
        raise failure
    raise ForbiddenAddress(refused or "the host name resolves to no address")


def _connect_timeout(timeout):
    """The connect timeout, cut to what is left of the try's deadline."""
    seconds = timeout if isinstance(timeout, int | float) else None
    deadline = CURRENT.get()
    if deadline is None:
        return seconds
    left = max(deadline.left(), 0.001)
    return left if seconds is None else min(seconds, left)


class GuardedConnection:
    """For urllib3's connection classes: connect only where `connect`
    allows, and put the socket under the try's deadline."""

    def _new_conn(self):
        try:
            sock = connect(
                (self._dns_host, self.port),
                self.timeout,
                source_address=self.source_address,
                socket_options=self.socket_options,
            )
        except socket.gaierror as error:
            raise NameResolutionError(self.host, self, error) from error
        except TimeoutError as error:
            raise ConnectTimeoutError(self, "connect timed out") from error
        except OSError as error:
            raise NewConnectionError(
                self, f"Failed to establish a new connection: {error}"
            ) from error
        deadline = CURRENT.get()
        if deadline is not None:
            deadline.watch(sock)
        return sock


class GuardedHTTPConnection(GuardedConnection, HTTPConnection):
    pass


class GuardedHTTPSConnection(GuardedConnection, HTTPSConnection):
    pass


class GuardedHTTPConnectionPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class GuardedHTTPSConnectionPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


GUARDED_POOLS = {"http": GuardedHTTPConnectionPool, "https": GuardedHTTPSConnectionPool}


class GuardedAdapter(requests.adapters.HTTPAdapter):
    """requests' adapter whose connections, direct or to a proxy, are guarded."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = GUARDED_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = GUARDED_POOLS
        return manager


def guard(session: requests.Session) -> requests.Session:
    """`session` with every http(s) connection guarded."""
    adapter = GuardedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


# The deadline of the try this thread is making (requests connects in the
# caller's thread).
CURRENT = contextvars.ContextVar("croniq_delivery_deadline", default=None)


class Deadline:
    """`with Deadline(seconds) as deadline:` a try that ends by then: when
    the time is up, the sockets it opened are shut down (a blocked read
    returns at once) and `deadline.passed` is true.

    A shutdown acts on the connection, not on one descriptor, so the try's
    sockets are watched through duplicates: TLS takes over the original's
    descriptor, and a closed descriptor's number may be reused."""

    def __init__(self, seconds) -> None:
        self.seconds = seconds
        self.passed = False
        self.over = False  # the try ended: nothing to shut any more
        self.lock = threading.Lock()
        self.sockets = []
        self.token = None
        self.due = None

    def __enter__(self):
        self.token = CURRENT.set(self)
        self.due = time.monotonic() + self.seconds
        WATCHDOG.add(self)
        return self

    def __exit__(self, *exc_info) -> bool:
        CURRENT.reset(self.token)
        with self.lock:
            self.over = True
            for sock in self.sockets:
                sock.close()
            self.sockets.clear()
        return False

    def left(self) -> float:
        return self.due - time.monotonic()

    def watch(self, sock: socket.socket) -> None:
        duplicate = sock.dup()
        with self.lock:
            self.sockets.append(duplicate)
            if self.passed:
                _shut(duplicate)

    def expire(self) -> None:
        with self.lock:
            if self.over:
                return
            self.passed = True
            for sock in self.sockets:
                _shut(sock)


class Watchdog:
    """One thread that expires every try's deadline in turn. (A timer
    thread per try cost 0.2 ms of CPU, about a tenth of a delivery's.)
    A try that ended stays in the heap until its time, then is dropped."""

    def __init__(self) -> None:
        self.condition = threading.Condition()
        self.heap = []
        self.order = itertools.count()  # equal instants: first in, first out
        self.thread = None

    def add(self, deadline: Deadline) -> None:
        with self.condition:
            heapq.heappush(self.heap, (deadline.due, next(self.order), deadline))
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(
                    target=self.run, name="croniq-deadlines", daemon=True
                )
                self.thread.start()
            if self.heap[0][2] is deadline:
                self.condition.notify()  # earlier than the one it waits for

    def run(self) -> None:
        with self.condition:
            while True:
                now = time.monotonic()
                while self.heap and self.heap[0][0] <= now:
                    heapq.heappop(self.heap)[2].expire()
                self.condition.wait(self.heap[0][0] - now if self.heap else None)


WATCHDOG = Watchdog()


def _shut(sock) -> None:
    with contextlib.suppress(OSError):  # already closed by the other end
        sock.shutdown(socket.SHUT_RDWR)
