"""A userspace TCP proxy in front of every node's federation port, one listener per directed
link (dialer -> target), so the nemesis can cut, delay or drop each link on its own.

Why a proxy and not network namespaces joined by veth pairs: namespaces need root and a
per-node setup (ip netns, bridges, addresses) that CI containers often forbid, and this
kernel has no `netem` for delay or loss anyway. The proxy needs nothing but a loopback port
per link, works unprivileged, and gives per-link control both ways. TLS passes through it
untouched (it forwards bytes), so peers still authenticate each other end to end.

A "drop" on a TCP link cannot lose bytes and keep the stream valid; it resets the
connection instead (each forwarded chunk has probability `drop` of killing it), which is
what a lossy path looks like to gRPC once TCP gives up.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field

CHUNK = 65536
CONNECT_TIMEOUT = 5.0


@dataclass
class LinkState:
    """How one directed link behaves now."""

    cut: bool = False
    delay: float = 0.0  # seconds added before each forwarded chunk
    drop: float = 0.0  # probability that a forwarded chunk resets the connection


@dataclass
class Link:
    """A listener that forwards what `source` dials to `target`'s federation port."""

    source: str
    target: str
    target_port: int
    rng: random.Random
    state: LinkState = field(default_factory=LinkState)
    port: int = 0
    server: asyncio.Server | None = None
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    connections: int = 0
    resets: int = 0


class Proxy:
    """Every directed link's listener, run on an event loop in its own thread."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.links: dict[tuple[str, str], Link] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def _run(self, coro: object, timeout: float = 10.0) -> object:
        fut: Future[object] = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        return fut.result(timeout=timeout)

    def add(self, source: str, target: str, target_port: int) -> int:
        """Listens for `source`'s dials to `target`; returns the loopback port to dial."""
        rng = random.Random(f"{self.seed}:{source}->{target}")
        link = Link(source, target, target_port, rng)
        self.links[(source, target)] = link
        self._run(self._listen(link))
        return link.port

    async def _listen(self, link: Link) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._serve(link, reader, writer)

        link.server = await asyncio.start_server(handle, "127.0.0.1", 0)
        link.port = int(link.server.sockets[0].getsockname()[1])

    async def _serve(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if link.state.cut:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", link.target_port), CONNECT_TIMEOUT
            )
        except (OSError, TimeoutError):
            writer.close()  # the target is down: the dialer sees its connection closed
            return
        link.connections += 1
        link.writers |= {writer, up_writer}
        pumps = [
            asyncio.ensure_future(self._pump(link, reader, up_writer)),
            asyncio.ensure_future(self._pump(link, up_reader, writer)),
        ]
        try:
            # Either direction ending (EOF, a cut, a drop) ends the connection both ways.
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in (writer, up_writer):
                link.writers.discard(w)
                w.close()
            for p in pumps:
                p.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)

    async def _pump(
        self, link: Link, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Forwards one direction until EOF, a cut or a drop."""
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                data = await reader.read(CHUNK)
                if not data or link.state.cut:
                    return
                if link.state.drop and link.rng.random() < link.state.drop:
                    link.resets += 1
                    return
                if link.state.delay:
                    await asyncio.sleep(link.state.delay)
                writer.write(data)
                await writer.drain()

    def set(self, pairs: Iterable[tuple[str, str]], state: LinkState) -> None:
        """Gives each directed link in `pairs` `state`; a cut closes its open connections."""
        self._run(self._set(list(pairs), state))

    async def _set(self, pairs: list[tuple[str, str]], state: LinkState) -> None:
        for pair in pairs:
            link = self.links[pair]
            link.state = LinkState(state.cut, state.delay, state.drop)
            if state.cut:
                for w in list(link.writers):
                    w.close()

    def heal(self) -> None:
        """Every link up, without delay or drops."""
        self.set(list(self.links), LinkState())

    def close(self) -> None:
        """Stops every listener and the loop."""
        with contextlib.suppress(Exception):
            self._run(self._close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    async def _close(self) -> None:
        for link in self.links.values():
            for w in list(link.writers):
                w.close()
            if link.server is not None:
                link.server.close()
        # Connections still being served (one waiting to dial its target, say) end here, not
        # when the closed loop's leftovers are collected: that raised "Event loop is closed"
        # and ResourceWarnings, reported against whichever test ran next.
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
