"""A TCP proxy a test controls, to put a network partition between two processes.

`cut()` behaves like a pulled cable, not like a stopped server: nothing is
refused or reset, bytes simply stop flowing, so the client sees its calls
time out. New connections are accepted (the kernel would anyway) and left
hanging. `heal()` resets every connection that lived through the cut (their
peers would have given up on them by then) and forwards new ones again.
`cut(mode="reset")` instead resets every connection at once and every new
one on arrival, like a crashed middlebox.
"""

import contextlib
import select
import socket
import struct
import threading
import time

TICK = 0.05


def _abort(sock):
    """Close with RST rather than FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Connection:
    def __init__(self, proxy, client):
        self.proxy = proxy
        self.client = client
        self.upstream = None
        self.doomed = False  # set from other threads; acted on by this one

    def run(self):
        try:
            self._run()
        finally:
            for sock in (self.client, self.upstream):
                if sock is not None:
                    _abort(sock)
            self.proxy._forget(self)

    def _run(self):
        while self.proxy.blocked and not self.doomed:
            time.sleep(TICK)
        if self.doomed:
            return
        try:
            self.upstream = socket.create_connection(self.proxy.target, timeout=5)
        except OSError:
            return
        sockets = [self.client, self.upstream]
        while not self.doomed:
            if self.proxy.blocked:
                time.sleep(TICK)  # the partition: leave bytes where they are
                continue
            readable, _, _ = select.select(sockets, [], [], TICK)
            for sock in readable:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                if sock is self.client and self.proxy.watched:
                    self.proxy._note_sent(data)
                other = self.upstream if sock is self.client else self.client
                try:
                    other.sendall(data)
                except OSError:
                    return


class TcpProxy:
    def __init__(self, target_port, target_host="127.0.0.1", watch=()):
        self.target = (target_host, target_port)
        self.blocked = False
        self.mode = None
        self.connections = set()
        self.accepted = 0
        # {text: chunks sent on whose first line holds it}: an HTTP call's
        # request line says that call has reached the target. Only the
        # texts asked for, so a long chaos run keeps no log of its calls.
        self.watched = dict.fromkeys(watch, 0)
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._running = True
        threading.Thread(target=self._accept_loop, name="proxy-accept", daemon=True).start()

    def _accept_loop(self):
        while self._running:
            readable, _, _ = select.select([self._listener], [], [], TICK)
            if not readable:
                continue
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            if self.blocked and self.mode == "reset":
                _abort(client)
                continue
            connection = _Connection(self, client)
            with self._lock:
                self.connections.add(connection)
                self.accepted += 1
            threading.Thread(target=connection.run, name="proxy-conn", daemon=True).start()

    def _note_sent(self, data):
        line = data.split(b"\r\n", 1)[0].decode("latin-1")
        with self._lock:
            for text in self.watched:
                if text in line:
                    self.watched[text] += 1

    def forwarded(self, text):
        """How many chunks sent on so far began with a line holding `text`
        (one of `watch`)."""
        with self._lock:
            return self.watched[text]

    def _forget(self, connection):
        with self._lock:
            self.connections.discard(connection)

    def _doom_all(self):
        with self._lock:
            for connection in self.connections:
                connection.doomed = True

    def cut(self, mode="blackhole"):
        self.mode = mode
        self.blocked = True
        if mode == "reset":
            self._doom_all()

    def heal(self):
        self._doom_all()
        deadline = time.monotonic() + 2
        while self.connections and time.monotonic() < deadline:
            time.sleep(TICK)
        self.blocked = False
        self.mode = None

    def close(self):
        self._running = False
        self._doom_all()
        self._listener.close()
