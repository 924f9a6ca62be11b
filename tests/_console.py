"""Helpers for the console's tests: a node served in-process with reader and operator tokens,
and the console itself served by uvicorn on a loopback port chosen by the kernel."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from factnode.client import Client
from factnode.clock import Clock
from factnode.config import Settings, TokenGrant
from factnode.console import ConsoleSettings, create_app
from factnode.core import Policy
from factnode.server.app import Node

READER, OPERATOR = "console-reader-token", "console-operator-token"
REPO = Path(__file__).resolve().parents[1]
# The committed screenshots are rewritten only on purpose; otherwise they go to an ignored folder.
UPDATE_SCREENSHOTS = "FACTNODE_UPDATE_SCREENSHOTS"
START_TIMEOUT = 20.0  # seconds for a node or the console to start serving
STOP_TIMEOUT = 10.0


def screenshot_dir() -> Path:
    """Where the browser tests save screenshots: build/screenshots/ (ignored by git), or the
    committed docs/screenshots/ when FACTNODE_UPDATE_SCREENSHOTS=1."""
    if os.environ.get(UPDATE_SCREENSHOTS) == "1":
        folder = REPO / "docs" / "screenshots"
    else:
        folder = REPO / "build" / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def chromium_path() -> str | None:
    """Debian's chromium, if installed (the browser tests skip without it)."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class InProcessNode:
    """A Node on its own event-loop thread, with a reader and an operator token (or, with
    `tokens=False`, none: every loopback caller is its operator), on the system clock or on
    `clock` (a `factnode.testing.FakeClock` moves the node's time when told to); `grants`
    adds tokens of its own (e.g. a reader of some namespaces only)."""

    def __init__(
        self,
        tmp: Path,
        policy: Policy | None = None,
        *,
        tokens: bool = True,
        database_url: str | None = None,
        clock: Clock | None = None,
        grants: dict[str, TokenGrant] | None = None,
    ) -> None:
        self.clock = clock
        every = {
            READER: TokenGrant(frozenset({"reader"}), ("*",), "rita"),
            OPERATOR: TokenGrant(frozenset({"operator"}), ("*",), "olga"),
            **(grants or {}),
        }
        self.settings = Settings(
            listen="127.0.0.1:0",
            data_dir=tmp / "data",
            database_url=database_url,
            node_id="console-node",
            tokens=every if tokens else {},
            grace_seconds=0.0,
            policy=policy or Policy(),
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.node: Node = self._call(self._start())
        self.address = f"127.0.0.1:{self.node.port}"

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=START_TIMEOUT)

    async def _start(self) -> Node:
        node = Node(self.settings, clock=self.clock)
        await node.start()
        return node

    def client(self, token: str = OPERATOR) -> Client:
        return Client(self.address, token=token, timeout=10, retries=0)

    def close(self) -> None:
        self._call(self.node.stop(0))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=STOP_TIMEOUT)
        assert not self.thread.is_alive(), "the node's event loop did not stop"
        self.loop.close()


class ConsoleServer:
    """`factnode console`'s app served by uvicorn on 127.0.0.1:<free port> in a thread."""

    def __init__(self, settings: ConsoleSettings) -> None:
        app = create_app(settings)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=5,
            lifespan="on",
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.console = app.state.console
        self.console.stopping = lambda: self.server.should_exit
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the console did not start serving")
            time.sleep(0.02)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=STOP_TIMEOUT)
        assert not self.thread.is_alive(), "the console did not stop"


def sign_in(http: httpx.Client, base: str, token: str, next_path: str = "/queue") -> None:
    """Signs `http` (a TestClient or an httpx.Client, keeping cookies) in to the console at
    `base` with `token`, as the login form would post it."""
    answer = http.post(
        f"{base}/login", data={"token": token, "next": next_path}, headers={"Origin": base},
        follow_redirects=False,
    )  # fmt: skip
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == next_path


def tie(node: Client, namespace: str, subject: str, values: tuple[str, ...]) -> None:
    """Facts no rule can decide between: same anchor, event time, worth and confidence, so the
    key is AMBIGUOUS and queued for review."""
    at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    for i, value in enumerate(values):
        node.submit(
            (namespace, subject, "lives_in"), value, "user_stated", source=f"witness-{i}",
            valid_from=at, confidence=0.9,
        )  # fmt: skip
