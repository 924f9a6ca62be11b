"""The campaign's link proxy: a link forwards both ways, a cut refuses and closes, a delay
slows each chunk, a drop resets the connection."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from _proxy import LinkState, Proxy

TIMEOUT = 5.0


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback echo server's port."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=pump, args=(conn,), daemon=True).start()

    def pump(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join(timeout=TIMEOUT)
    server.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    p = Proxy(seed=1)
    yield p
    p.close()


def roundtrip(port: int, payload: bytes = b"ping") -> bytes:
    """Sends `payload` through the link and reads it back; b"" when the link closed (a
    close with unread bytes arrives as a reset)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return b""
            if not chunk:
                break
            got += chunk
        return got


def test_a_link_forwards_both_ways_and_a_cut_closes_it_until_healed(
    echo: int, proxy: Proxy
) -> None:
    """Bytes cross an open link; a cut link closes open and new connections; healing
    restores it."""
    port = proxy.add("a", "b", echo)
    assert roundtrip(port) == b"ping"
    held = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    held.sendall(b"x")
    assert held.recv(1) == b"x"
    proxy.set([("a", "b")], LinkState(cut=True))
    try:
        closed = held.recv(1) == b""
    except ConnectionResetError:
        closed = True
    assert closed, "the open connection is closed by the cut"
    held.close()
    assert roundtrip(port) == b""
    proxy.heal()
    assert roundtrip(port) == b"ping"


def test_a_delay_slows_each_chunk_and_a_drop_resets_the_connection(echo: int, proxy: Proxy) -> None:
    """A delayed link answers no sooner than its delay each way; a link dropping every
    chunk closes the connection instead of forwarding."""
    port = proxy.add("a", "b", echo)
    proxy.set([("a", "b")], LinkState(delay=0.3))
    started = time.monotonic()
    assert roundtrip(port) == b"ping"
    assert time.monotonic() - started >= 0.6
    proxy.set([("a", "b")], LinkState(drop=1.0))
    assert roundtrip(port) == b""
    assert proxy.links[("a", "b")].resets >= 1
