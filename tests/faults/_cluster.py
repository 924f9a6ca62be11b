"""Real `factnode serve` processes for a fault campaign: certificates from one CA, every
peer link through the proxy, short sync intervals, each node's own store (a SQLite file, or
a fresh PostgreSQL database created and dropped here), and the nemesis's hands on them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
# The federation tests' node launcher and the shared stop helpers, reused as they are.
for _p in (TESTS, TESTS / "integration" / "federation"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from _fednet import (  # noqa: E402
    FedNode,
    StartError,
    free_port,
    make_identities,
    peer_channel,
)
from _proxy import LinkState, Proxy  # noqa: E402

SYNC_INTERVAL_SECONDS = 1.0
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
DISK_SIZE = "96m"  # above the SQLite log's bound (64 MiB), as tests/e2e/test_disk_full.py
POSTGRES_ENV = "FACTNODE_TEST_POSTGRES_URL"


def faketime_library() -> Path | None:
    """libfaketime's preload library where installed (Debian's `faketime` package)."""
    found = os.environ.get("FACTNODE_FAKETIME_LIB")
    path = Path(found) if found else FAKETIME_LIB
    return path if path.exists() else None


@dataclass
class FaultNode(FedNode):
    """A FedNode whose config comes from the cluster's topology, with a fixed client port
    (clients keep one channel across restarts) and an optional clock offset (libfaketime)."""

    client_port: int = 0
    database_url: str | None = None
    clock_offset: int = 0  # seconds; applied at the next spawn
    peer_addresses: dict[str, str] = field(default_factory=dict)  # peer id -> address it dials
    data_root: Path | None = None  # where the data dir lives (a tmpfs for the disk node)

    @property
    def data_dir(self) -> Path:
        return (self.data_root or self.workdir) / "data"

    def write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(node_config(self))

    def spawn(self) -> None:
        self.extra_env = {}
        if self.clock_offset:
            lib = faketime_library()
            assert lib is not None, "a clock offset needs libfaketime"
            # A constant offset, set at start: libfaketime shifts CLOCK_MONOTONIC by the same
            # constant, which the event loop tolerates; changing it in a live process would
            # jump the monotonic clock.
            self.extra_env = {"LD_PRELOAD": str(lib), "FAKETIME": f"{self.clock_offset:+d}"}
        super().spawn()

    def restart(self) -> None:
        """Starts the process again on the same data, ports and config."""
        self._close_channel()
        self.spawn()
        self.wait_listening()
        self.port = self.client_port

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)


def node_config(node: FaultNode) -> str:
    """The node's TOML. The topology lives here alone: today every other node is a
    `[[peers]]` entry dialled through the proxy; a fleet with seeds changes only this."""
    lines = [
        f'listen = "127.0.0.1:{node.client_port}"',
        f'data_dir = "{node.data_dir}"',
        f'node_id = "{node.node_id}"',
        "grace_seconds = 2",
    ]
    if node.database_url:
        lines.append(f'database_url = "{node.database_url}"')
    lines += [
        "",
        "[federation]",
        f'listen = "{node.federation_address}"',
        f'cert = "{node.tls.cert}"',
        f'key = "{node.tls.key}"',
        f'ca = "{node.tls.ca}"',
        f"sync_interval_seconds = {SYNC_INTERVAL_SECONDS}",
    ]
    for peer_id, address in sorted(node.peer_addresses.items()):
        lines += ["", "[[peers]]", f'address = "{address}"', f'node_id = "{peer_id}"']
    return "\n".join(lines) + "\n"


@contextmanager
def postgres_databases(count: int) -> Iterator[list[str]]:
    """`count` fresh PostgreSQL databases (uniquely named), dropped on exit."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(os.environ[POSTGRES_ENV])
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    names = [f"faults_{uuid.uuid4().hex[:12]}" for _ in range(count)]
    try:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield [base.set(database=n).render_as_string(hide_password=False) for n in names]
    finally:
        with admin.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def mount_tmpfs(point: Path, size: str = DISK_SIZE) -> str | None:
    """Mounts a small tmpfs at `point`; None when done, else why it cannot be."""
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        return "mounting a tmpfs needs root and mount(8)"
    point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
        capture_output=True,
        text=True,
        timeout=15,
    )
    return None if done.returncode == 0 else f"cannot mount a tmpfs: {done.stderr.strip()}"


def unmount(point: Path) -> None:
    umount = shutil.which("umount")
    if umount:
        subprocess.run([umount, "-l", str(point)], capture_output=True, timeout=15)


def fill(disk: Path) -> Path:
    """Writes a ballast file until the disk has no room left; returns it."""
    ballast = disk / "ballast"
    chunk = b"\0" * 65536
    with open(ballast, "wb", buffering=0) as out:
        for size in (65536, 1):
            piece = chunk[:size]
            while True:
                try:
                    out.write(piece)
                except OSError:
                    break
    return ballast


class Cluster:
    """N nodes, a CA, the proxy; started, faulted, healed and stopped here."""

    def __init__(
        self,
        root: Path,
        node_ids: list[str],
        seed: int,
        *,
        database_urls: list[str] | None = None,
        disk_node: str | None = None,
    ) -> None:
        self.root = root
        self.proxy = Proxy(seed)
        ids = make_identities(root / "certs", node_ids)
        self.nodes = {n: FaultNode(n, root / n, ids[n]) for n in node_ids}
        self.disk_point: Path | None = None
        self.disk_skip: str | None = None
        for i, node in enumerate(self.nodes.values()):
            node.database_url = database_urls[i] if database_urls else None
        if disk_node is not None:
            point = root / "disk"
            self.disk_skip = mount_tmpfs(point)
            if self.disk_skip is None:
                self.disk_point = point
                self.nodes[disk_node].data_root = point

    def __getitem__(self, node_id: str) -> FaultNode:
        return self.nodes[node_id]

    def start(self) -> None:
        """Picks ports, puts a proxy listener on every directed link, starts every node."""
        for node in self.nodes.values():
            node.federation_port = free_port()
            node.client_port = free_port()
        for src in self.nodes.values():
            for dst in self.nodes.values():
                if src is not dst:
                    port = self.proxy.add(src.node_id, dst.node_id, dst.federation_port)
                    src.peer_addresses[dst.node_id] = f"127.0.0.1:{port}"
        for node in self.nodes.values():
            node.write_config()
            node.spawn()
        for node in self.nodes.values():
            node.wait_listening()

    def links_of(self, node_id: str) -> list[tuple[str, str]]:
        return [p for p in self.proxy.links if node_id in p]

    def cut(self, pairs: list[tuple[str, str]]) -> None:
        self.proxy.set(pairs, LinkState(cut=True))

    def heal_network(self) -> None:
        self.proxy.heal()

    def stop(self) -> list[str]:
        """SIGCONT, then SIGTERM and a bounded wait for every node; names those that needed
        SIGKILL."""
        killed = []
        for node in self.nodes.values():
            node.signal(signal.SIGCONT)
            if node.proc is not None and node.stop() is None:
                killed.append(node.node_id)
        return killed

    def close(self) -> None:
        """Kills whatever still runs, stops the proxy, unmounts the disk."""
        for node in self.nodes.values():
            node.signal(signal.SIGCONT)
            node.kill()
        self.proxy.close()
        if self.disk_point is not None:
            unmount(self.disk_point)


__all__ = [
    "Cluster",
    "FaultNode",
    "StartError",
    "faketime_library",
    "peer_channel",
    "postgres_databases",
]
