"""A small real federation for tests: `factnode serve` processes that peer over mTLS.

Peers must know each other's federation address before they start, so each node's
federation port is chosen up front (bound to port 0, read, released). Another process
could take the port in between; `Federation.start` then picks new ports and tries again.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
from _processes import STOP_TIMEOUT, kill_process, stop_process
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf.timestamp_pb2 import Timestamp

from factnode import _wire as wire
from factnode.api.v1 import factnode_pb2 as pb
from factnode.api.v1 import factnode_pb2_grpc as pb_grpc
from factnode.certs import ensure_ca, issue_node_cert
from factnode.core.signed import evidence_payload, tombstone_payload, vote_payload

START_TIMEOUT = 30.0  # seconds for `serve` to announce its ports (several start at once)
RPC_TIMEOUT = 15.0  # seconds for one client call
SYNC_TIMEOUT = 40.0  # seconds for one SyncNow (a round with every peer)
MAX_SWEEPS = 10  # sync sweeps (SyncNow on every node) before giving up on convergence
START_ATTEMPTS = 3

BELIEVED = pb.BELIEF_STATE_BELIEVED
CONTESTED = pb.BELIEF_STATE_CONTESTED
AMBIGUOUS = pb.BELIEF_STATE_AMBIGUOUS


class StartError(RuntimeError):
    """A node did not announce its ports; carries its output."""


def free_port() -> int:
    """A loopback port nothing listens on right now (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique_ns(prefix: str) -> str:
    """A namespace no other test uses."""
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def event_time() -> Timestamp:
    """One recent event time shared by a test's facts (the start of the previous UTC hour),
    so every vote has the same freshness and weights are in the ratio of anchor x worth."""
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    ts = Timestamp()
    ts.FromDatetime(hour)
    return ts


def key(namespace: str, subject: str, predicate: str) -> pb.Key:
    return pb.Key(namespace=namespace, subject=subject, predicate=predicate)


def isolated_env(home: Path) -> dict[str, str]:
    """The test's environment without FACTNODE_* settings, with HOME under the test's dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FACTNODE_")}
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), PYTHONUNBUFFERED="1")
    return env


@dataclass
class TlsIdentity:
    """The files a node presents on its peer links."""

    cert: Path
    key: Path
    ca: Path


def make_identities(ca_dir: Path, node_ids: Iterable[str]) -> dict[str, TlsIdentity]:
    """A CA in `ca_dir` and a certificate naming each node id, signed by it."""
    ensure_ca(ca_dir)
    out = {}
    for node_id in node_ids:
        crt, k = issue_node_cert(ca_dir, node_id)
        out[node_id] = TlsIdentity(crt, k, ca_dir / "ca.crt")
    return out


@dataclass
class FedNode:
    """One `factnode serve` process with a federation port fixed in its config."""

    node_id: str
    workdir: Path
    tls: TlsIdentity
    federation_port: int = 0
    peers: list[FedNode] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    lines: list[str] = field(default_factory=list)
    _queue: queue.Queue[str | None] = field(default_factory=queue.Queue)
    extra_config: str = ""  # TOML appended to the generated config (tables such as [[tokens]])
    peer_max_anchor: dict[str, str] = field(default_factory=dict)  # peer node id -> its cap
    # Nodes known only by address (`federation.seeds`), and the node's own round interval.
    seeds: list[FedNode] = field(default_factory=list)
    sync_interval: float = 3600.0
    extra_env: dict[str, str] = field(default_factory=dict)  # e.g. LD_PRELOAD for libfaketime
    serve_args: list[str] = field(default_factory=list)  # e.g. ["--restore", FILE]
    _channel: grpc.Channel | None = None
    _stderr: Path | None = None

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def config_path(self) -> Path:
        return self.workdir / "factnode.toml"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def federation_address(self) -> str:
        return f"127.0.0.1:{self.federation_port}"

    # -- process ---------------------------------------------------------------

    def write_config(self) -> None:
        """listen on port 0 for clients, a fixed federation port, every peer listed."""
        lines = [
            'listen = "127.0.0.1:0"',
            f'data_dir = "{self.data_dir}"',
            f'node_id = "{self.node_id}"',
            "grace_seconds = 2",
            "",
            "[federation]",
            f'listen = "{self.federation_address}"',
            f'cert = "{self.tls.cert}"',
            f'key = "{self.tls.key}"',
            f'ca = "{self.tls.ca}"',
            # Rounds are driven by the tests' SyncNow (the node's own loop runs once at
            # start), unless a test gives the node a short interval of its own.
            f"sync_interval_seconds = {self.sync_interval}",
        ]
        if self.seeds:
            lines.append(
                f"seeds = {[s.federation_address for s in self.seeds]!r}".replace("'", '"')
            )
        for peer in self.peers:
            lines += [
                "",
                "[[peers]]",
                f'address = "{peer.federation_address}"',
                f'node_id = "{peer.node_id}"',
            ]
            if peer.node_id in self.peer_max_anchor:
                lines.append(f'max_anchor = "{self.peer_max_anchor[peer.node_id]}"')
        if self.extra_config:
            lines += ["", self.extra_config]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("\n".join(lines) + "\n")

    def spawn(self) -> None:
        """Starts the process; `wait_listening` reads its ports."""
        assert self.proc is None or self.proc.poll() is not None, f"{self.node_id} is running"
        self.lines = []
        self._queue = queue.Queue()
        self.port = 0
        self._stderr = self.workdir / f"serve-{uuid.uuid4().hex[:8]}.stderr"
        with open(self._stderr, "w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "factnode.cli",
                    "serve",
                    "--config",
                    str(self.config_path),
                    *self.serve_args,
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
                env=isolated_env(self.workdir / "home") | self.extra_env,
                cwd=self.workdir,
            )
        threading.Thread(target=self._drain, args=(self.proc, self._queue), daemon=True).start()

    def _drain(self, proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def wait_listening(self, timeout: float = START_TIMEOUT) -> None:
        """Waits (bounded) for the `listening on` and `federation (mTLS) on` lines."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        federation_seen = False
        while not (self.port and federation_seen):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise StartError(
                    f"{self.node_id} announced no ports within {timeout}s: {self.output()}"
                )
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(timeout=STOP_TIMEOUT)
                raise StartError(
                    f"{self.node_id} exited with {self.proc.returncode}: {self.output()}"
                )
            if " listening on " in line:
                first, _, host_port = line.partition(" listening on ")
                announced = first.removeprefix("factnode ").strip()
                if announced != self.node_id:
                    raise StartError(f"expected node {self.node_id}, it announced {announced}")
                self.port = int(host_port.rsplit(":", 1)[1])
            elif line.startswith("federation (mTLS) on "):
                addr = line.removeprefix("federation (mTLS) on ").split()[0]
                if int(addr.rsplit(":", 1)[1]) != self.federation_port:
                    raise StartError(
                        f"{self.node_id} federates on {addr}, not {self.federation_port}"
                    )
                federation_seen = True

    def output(self) -> str:
        err = (
            self._stderr.read_text(errors="replace")
            if self._stderr and self._stderr.exists()
            else ""
        )
        return "stdout:\n" + "\n".join(self.lines) + "\nstderr:\n" + err[-4000:]

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and a bounded wait: the exit code, or None when it needed SIGKILL."""
        self._close_channel()
        if self.proc is None:
            return 0
        code = stop_process(self.proc, timeout=timeout)
        self._close_pipe()
        return code

    def kill(self) -> None:
        """SIGKILL, and reap."""
        self._close_channel()
        if self.proc is not None:
            kill_process(self.proc)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def _close_channel(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # -- client API ------------------------------------------------------------

    @property
    def channel(self) -> grpc.Channel:
        if self._channel is None:
            assert self.port, f"{self.node_id} is not running"
            self._channel = grpc.insecure_channel(self.address)
            grpc.channel_ready_future(self._channel).result(timeout=RPC_TIMEOUT)
        return self._channel

    @property
    def facts(self) -> pb_grpc.FactServiceStub:
        return pb_grpc.FactServiceStub(self.channel)

    @property
    def review(self) -> pb_grpc.ReviewServiceStub:
        return pb_grpc.ReviewServiceStub(self.channel)

    @property
    def admin(self) -> pb_grpc.AdminServiceStub:
        return pb_grpc.AdminServiceStub(self.channel)

    def submit(
        self,
        k: pb.Key,
        obj: str,
        *,
        source: str,
        attribution: str = "agent_observed",
        worth: float = 0.5,
        confidence: float = 0.9,
        valid_from: Timestamp | None = None,
    ) -> pb.SubmitFactResponse:
        fact = pb.FactInput(
            key=k,
            object=obj,
            anchor=attribution,
            source=source,
            worth=worth,
            confidence=confidence,
        )
        if valid_from is not None:
            fact.valid_from.CopyFrom(valid_from)
        return self.facts.SubmitFact(pb.SubmitFactRequest(fact=fact), timeout=RPC_TIMEOUT)

    def belief(self, k: pb.Key) -> pb.Belief | None:
        """The served belief, or None when the node has none for the key."""
        try:
            return self.facts.GetBelief(pb.GetBeliefRequest(key=k), timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def history(self, k: pb.Key) -> pb.GetHistoryResponse | None:
        try:
            return self.facts.GetHistory(pb.GetHistoryRequest(key=k), timeout=RPC_TIMEOUT)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    def sync(self, peer: str = "") -> pb.SyncNowResponse:
        return self.admin.SyncNow(pb.SyncNowRequest(peer_node_id=peer), timeout=SYNC_TIMEOUT)

    def contested(self, namespace: str) -> dict[tuple[str, str, str], pb.ContestedKey]:
        reply = self.review.ListContested(
            pb.ListContestedRequest(namespace=namespace, page_size=1000), timeout=RPC_TIMEOUT
        )
        return {(c.key.namespace, c.key.subject, c.key.predicate): c for c in reply.keys}

    def store_files(self) -> dict[str, bytes]:
        """The bytes of the SQLite database file and of its -wal/-shm companions, by file name."""
        db = self.data_dir / "factnode.db"
        return {
            p.name: p.read_bytes() for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")) if p.exists()
        }


def refused(call: Callable[[], object]) -> grpc.StatusCode:
    """The status code of a call that must fail."""
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    raise AssertionError("the call succeeded; it must be refused")


def node_id_of(identity: TlsIdentity) -> str:
    """The node id (common name) its certificate names."""
    cert = x509.load_pem_x509_certificate(identity.cert.read_bytes())
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def signed_vote(identity: TlsIdentity, msg: pb.Vote, voter: str = "") -> pb.Vote:
    """`msg` as `identity`'s node signs it (specification §7): naming `voter` (default: that node)
    and numbered `msg.seq` (default: its cast_at in microseconds, so later casts number
    higher), with its certificate's key over the vote's canonical bytes."""
    out = pb.Vote()
    out.CopyFrom(msg)
    out.voter = voter or out.voter or node_id_of(identity)
    out.seq = out.seq or out.cast_at.ToMicroseconds()
    out.signature = _sign(identity, vote_payload(wire.vote(out, out.voter)))
    return out


def signed_evidence(identity: TlsIdentity, msg: pb.RelayedEvidence) -> pb.RelayedEvidence:
    """`msg` as its origin, `identity`'s node, signs it (specification §7): whatever origin it
    names, the signature is by `identity`'s key."""
    out = pb.RelayedEvidence()
    out.CopyFrom(msg)
    out.signature = _sign(identity, evidence_payload(wire.relayed(out)))
    return out


def signed_tombstone(identity: TlsIdentity, msg: pb.ErasureTombstone) -> pb.ErasureTombstone:
    """`msg` signed by `identity`'s node as the node where the erasure was made."""
    out = pb.ErasureTombstone()
    out.CopyFrom(msg)
    out.signature = _sign(identity, tombstone_payload(wire.tombstone(out)))
    return out


def _sign(identity: TlsIdentity, payload: bytes) -> bytes:
    key = serialization.load_pem_private_key(identity.key.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key.sign(payload, ec.ECDSA(hashes.SHA256()))


def certificate_der(identity: TlsIdentity) -> bytes:
    """The identity's certificate in DER, as a delta carries it."""
    cert = x509.load_pem_x509_certificate(identity.cert.read_bytes())
    return cert.public_bytes(serialization.Encoding.DER)


def peer_channel(identity: TlsIdentity, target: FedNode) -> grpc.Channel:
    """A channel to `target`'s federation port presenting `identity`'s certificate."""
    creds = grpc.ssl_channel_credentials(
        root_certificates=identity.ca.read_bytes(),
        private_key=identity.key.read_bytes(),
        certificate_chain=identity.cert.read_bytes(),
    )
    return grpc.secure_channel(
        target.federation_address,
        creds,
        options=[("grpc.ssl_target_name_override", target.node_id)],
    )


class Federation:
    """N nodes, each listing every other as a peer, with certificates from one CA.

    Nodes named in `foreign` trust that CA but present a certificate (naming their own
    node id) from a different CA, as an impostor would."""

    def __init__(self, root: Path, node_ids: Sequence[str], foreign: Sequence[str] = ()) -> None:
        self.root = root
        ids = make_identities(root / "certs", [n for n in node_ids if n not in foreign])
        for node_id, other in make_identities(root / "other-ca", foreign).items():
            ids[node_id] = TlsIdentity(other.cert, other.key, root / "certs" / "ca.crt")
        self.nodes = {n: FedNode(n, root / n, ids[n]) for n in node_ids}
        for node in self.nodes.values():
            node.peers = [p for p in self.nodes.values() if p is not node]

    def __getitem__(self, node_id: str) -> FedNode:
        return self.nodes[node_id]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.nodes.values())

    def running(self) -> list[FedNode]:
        return [n for n in self.nodes.values() if n.running]

    def start(self, absent: Collection[str] = ()) -> None:
        """Starts every node at once; if one fails (a port taken meanwhile), tries new ports.

        Nodes in `absent` are listed as peers (with an address and a certificate) but not
        started: a test speaks for them over their peer link."""
        nodes = [n for n in self.nodes.values() if n.node_id not in absent]
        for attempt in range(START_ATTEMPTS):
            for node in self.nodes.values():
                node.federation_port = free_port()
            for node in nodes:
                node.write_config()
            for node in nodes:
                node.spawn()
            try:
                for node in nodes:
                    node.wait_listening()
                return
            except StartError:
                for node in nodes:
                    node.kill()
                if attempt == START_ATTEMPTS - 1:
                    raise

    def stop(self) -> list[str]:
        """Stops every node; names those that needed SIGKILL."""
        killed = []
        for node in self.nodes.values():
            if node.proc is not None and node.stop() is None:
                killed.append(node.node_id)
        return killed

    def sync_until_quiet(self, down: Iterable[str] = (), sweeps: int = MAX_SWEEPS) -> int:
        """SyncNow on every running node in turn until one whole sweep finds nothing to move.

        A sweep in which no round moved anything changed no node, so after it every pair
        of running nodes holds the same evidence, tombstones and votes. Rounds with nodes
        in `down` are expected to fail. Returns the number of sweeps it took."""
        down = set(down)
        last: list[str] = []
        for sweep in range(1, sweeps + 1):
            quiet = True
            last = []
            for node in self.nodes.values():
                if node.node_id in down:
                    continue
                for r in node.sync().results:
                    if r.node_id in down:
                        assert not r.ok, f"{node.node_id} synced with {r.node_id}, which is down"
                        continue
                    if not r.ok or r.differing_buckets:
                        quiet = False
                        last.append(
                            f"{node.node_id}->{r.node_id}: {r.error or r.differing_buckets}"
                        )
            if quiet:
                return sweep
        raise AssertionError(f"no quiet sweep after {sweeps} sweeps; last: {last}")


# The `start_federation` fixture: node ids (and `foreign=`, `absent=`, and `configure=`, called
# with the federation before it starts) in, a running federation out.
StartFederation = Callable[..., Federation]
