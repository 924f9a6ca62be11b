"""The composition root: builds a running node from settings, and nothing else does."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import signal
import socket
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

import grpc
from cryptography import x509
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from factnode.api.v1 import factnode_pb2 as pb
from factnode.clock import Clock, SystemClock
from factnode.config import ConfigError, Peer, Settings, check_exposure, redact_url
from factnode.federation._index import index_of
from factnode.federation.members import Roster
from factnode.federation.sync import MAX_DELTA_BYTES, FederationEndpoint, Syncer
from factnode.federation.transport import FederationServicer, GrpcPeerLink, TlsFiles, identify
from factnode.federation.trust import Authority, NotAMember, Signer
from factnode.ledger import (
    REVOCATION_META,
    BadExport,
    ImportRefused,
    Ledger,
    Submitted,
    ensure_node_id,
)
from factnode.metrics import ERASURE_GAUGE_SECONDS, Metrics, serve_metrics
from factnode.server._admin import AdminServicer
from factnode.server._admission import CallGate
from factnode.server._auth import Access
from factnode.server._background import Background, Job
from factnode.server._context import Changes, NodeContext, StreamQuota
from factnode.server._decoding import add_service
from factnode.server._fact import FactServicer
from factnode.server._group_commit import GroupCommit
from factnode.server._loop import loop_name
from factnode.server._restore import RestoreGate
from factnode.server._review import ReviewServicer
from factnode.store import (
    CommitListener,
    Lease,
    SqlRepository,
    StoreInUse,
    StoreLock,
    Writes,
    replica_name,
)

log = logging.getLogger("factnode.server")

# gRPC's server drops, as CANCELLED, calls that arrive while more than 1,000 wait for the
# application to pick them up (at random up to 3,000, every one beyond). The client port
# answers overload itself, at once and with a retry hint (`_admission`), so it picks calls
# up fast; this bound is left only against a flood far beyond any client's.
MAX_WAITING_CALLS = 100_000

SERVICE_NAMES = tuple(
    pb.DESCRIPTOR.services_by_name[name].full_name
    for name in ("FactService", "ReviewService", "AdminService")
)


def check_free(address: str, setting: str) -> None:
    """ConfigError when another process holds `address`; checked before gRPC binds, whose
    own failure comes with a C-level log line on stderr."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return
    try:
        infos = socket.getaddrinfo(host.strip("[]") or None, int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return  # gRPC reports an address it cannot resolve
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(sockaddr)
        except OSError as exc:
            raise ConfigError(setting, f"cannot listen on {address}: {exc.strerror}") from None


def _certificate_name(settings: Settings) -> str | None:
    """The common name of the federation certificate, when the node federates with one."""
    if not settings.federated or settings.federation_cert is None:
        return None
    try:
        names = x509.load_pem_x509_certificate(settings.federation_cert.read_bytes()).subject
        found = names.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)
    except (OSError, ValueError):
        return None  # reported where the certificate is loaded for TLS
    return str(found[0].value) if found else None


class Node:
    """One running factnode: its store, ledger and gRPC server.

    `restore` names an export to import before anything else writes to the store (before
    the first sync round): the restore flow of a federated node (`factnode serve
    --restore`). A restored federated node serves no data until its first round has
    completed, unless `serve_before_sync` (`_restore.RestoreGate`)."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock | None = None,
        *,
        restore: Path | None = None,
        serve_before_sync: bool = False,
    ) -> None:
        check_exposure(settings)
        self.settings = settings
        if settings.database_url is None:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.store_lock = _lock_store(settings)
        try:
            self.repo = SqlRepository(settings.db_url, cache_keys=settings.cache_keys)
            # A new federated node is who its certificate names, unless configured otherwise.
            node_id = ensure_node_id(
                self.repo,
                settings.node_id,
                _certificate_name(settings) or f"node-{uuid.uuid4().hex[:12]}",
            )
        except BaseException:
            if self.store_lock is not None:
                self.store_lock.release()
            raise
        self.ledger = Ledger(self.repo, settings.policy, node_id, clock or SystemClock())
        self.ledger.erasure_grants = settings.accept_erasures_from
        self.metrics = Metrics()
        self.ledger.on_refused(self.metrics.peer_refused)
        self.ledger.on_commit(lambda fx: self.metrics.erasures_refused.inc(fx.erasures_refused))
        # grpc-stubs' grpc_health stubs omit the `aio` submodule that grpcio-health-checking has.
        self.health = health.aio.HealthServicer()  # type: ignore[attr-defined]
        self.server: grpc.aio.Server | None = None
        self.federation_server: grpc.aio.Server | None = None
        self.port = 0
        self.federation_port = 0
        self._links: dict[str, GrpcPeerLink] = {}
        self._metrics_server: Any = None
        self._gauges: asyncio.Task[None] | None = None
        self.writer: GroupCommit | None = None
        self.background: Background | None = None
        self.listener: CommitListener | None = None
        self.changes: Changes | None = None
        self.syncer: Syncer | None = None
        self.roster: Roster | None = None
        if settings.federated:
            index_of(self.ledger)  # digests are kept from the first write on
        if restore is not None:
            self._restore_before_start(restore)
        self.gate = RestoreGate(self.ledger, settings.federated, serve_before_sync)
        if settings.federated:
            self.roster = self._roster()
            self.roster.on_refused(lambda n: self.metrics.peer_refused({"member_record": n}))
            tls = self._tls()
            self.syncer = Syncer(
                self.ledger,
                settings.peers,
                self._link,
                fanout=settings.fanout,
                interval=settings.sync_interval_seconds,
                refused=self.roster.is_revoked,
                roster=self.roster,
                seeds=settings.seeds,
                identify=lambda address: identify(address, tls),
            )
            self.syncer.on_synced.append(self.gate.synced)

    def _restore_before_start(self, path: Path) -> None:
        """Imports the export at `path` into this node's store before it serves or syncs;
        a store this file already restored (a restart with the same command line) is
        served as it is. ConfigError naming `restore` otherwise, the store closed."""
        try:
            with open(path, "rb") as stream:
                trailer = _trailer_sha256(stream)
                stream.seek(0)
                check = None
                if self.settings.federated:
                    authority = Authority(self._tls().ca)
                    check = _revocation_check(authority)
                done = self.ledger.restore(stream, check_revocations=check)
        except ImportRefused as exc:
            held = self.ledger.restored_from() or ""
            if trailer and f"sha256 {trailer[:16]}" in held:
                log.info("the store already holds %s: not imported again", held)
                return
            self._abandon()
            raise ConfigError("restore", f"{path}: {exc}") from None
        except BadExport as exc:
            self._abandon()
            raise ConfigError("restore", f"{path}: {exc}") from None
        except OSError as exc:
            self._abandon()
            raise ConfigError("restore", f"cannot read {path}: {exc.strerror}") from None
        log.info(
            "restored %d evidence, %d tombstones, %d pins, %d member records%s from %s",
            done.evidence,
            done.tombstones,
            done.pins,
            len(done.members),
            " and a revocation list" if done.revocation_list else "",
            path,
        )

    def _abandon(self) -> None:
        """Closes the store of a node that will not start."""
        self.repo.close()
        if self.store_lock is not None:
            self.store_lock.release()

    def _roster(self) -> Roster:
        """The federation's members as this node knows them; its own certificate must name
        its node id, since that is who its signatures and links say it is."""
        tls = self._tls()
        authority = Authority(tls.ca)
        try:
            signer = Signer(authority, tls.cert, tls.key)
        except (NotAMember, ValueError) as exc:
            raise ConfigError("federation.cert", str(exc)) from None
        own = signer.identity
        if own.node_id != self.ledger.node_id:
            # Peers know this node by its certificate alone; the stored id only names it in
            # its own logs and status. Kept working for stores made before that was checked.
            log.warning(
                "federation certificate names %r but this node's id is %r: peers know it as %r",
                own.node_id,
                self.ledger.node_id,
                own.node_id,
            )
        repo = self.repo

        def load() -> bytes | None:
            with repo.read() as tx:
                held = tx.meta(REVOCATION_META)
            return None if held is None else base64.b64decode(held)

        def save(der: bytes) -> None:
            with repo.write() as tx:
                tx.apply(Writes(meta={REVOCATION_META: base64.b64encode(der).decode()}))

        # Votes are signed with the certificate's key and checked against their voter's
        # (specification §7); votes stored unsigned by an older version are signed now.
        roster = Roster(self.ledger, authority, signer, self.settings.peers, load, save)
        self.ledger.signing = roster.signing()
        signed = self.ledger.sign_own_votes()
        if signed:
            log.info("signed %d vote(s) this node stored before votes were signed", signed)
        resigned = self.ledger.resign_own_votes(f"{signer.identity.serial:x}")
        if resigned:
            log.info("re-signed %d vote(s) with this node's reissued certificate", resigned)
        return roster

    def _tls(self) -> TlsFiles:
        s = self.settings
        assert s.federation_cert and s.federation_key and s.federation_ca
        return TlsFiles(
            s.federation_cert.read_bytes(),
            s.federation_key.read_bytes(),
            s.federation_ca.read_bytes(),
        )

    def _link(self, peer: Peer) -> GrpcPeerLink:
        link = self._links.get(peer.node_id)
        if link is None:
            link = self._links[peer.node_id] = GrpcPeerLink(
                peer, self._tls(), self.settings.max_message_bytes
            )
        return link

    async def _start_federation(self, options: list[tuple[str, int]]) -> None:
        """Peers talk on their own port, over mutual TLS only: client tokens cannot reach it."""
        s = self.settings
        assert s.federation_listen is not None
        tls = self._tls()
        server = grpc.aio.server(options=options)
        # A delta answer fits well within the message limit, whatever it is set to.
        endpoint = FederationEndpoint(
            self.ledger,
            s.peers,
            max_delta_bytes=min(MAX_DELTA_BYTES, s.max_message_bytes // 2),
            roster=self.roster,
        )
        add_service(server, FederationServicer(endpoint, self.roster), "FederationService", None)
        creds = grpc.ssl_server_credentials(
            [(tls.key, tls.cert)], root_certificates=tls.ca, require_client_auth=True
        )
        check_free(s.federation_listen, "federation.listen")
        port = server.add_secure_port(s.federation_listen, creds)
        if port == 0:
            raise ConfigError("federation.listen", f"could not bind {s.federation_listen}")
        await server.start()
        self.federation_server, self.federation_port = server, port
        if self.roster is not None:
            # The record other members dial this node by: the advertised address, else the
            # listen address with the port bound (port 0 picks one).
            advertised = s.federation_advertise or f"{s.federation_listen.rsplit(':', 1)[0]}:{port}"
            await asyncio.to_thread(self.roster.publish, advertised)

    @property
    def node_id(self) -> str:
        return self.ledger.node_id

    async def start(self) -> int:
        """Binds the listen address and starts serving; returns the bound port."""
        s = self.settings
        options = [
            ("grpc.max_receive_message_length", s.max_message_bytes),
            ("grpc.max_send_message_length", s.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ]
        server = grpc.aio.server(
            options=[
                *options,
                ("grpc.server.max_pending_requests", MAX_WAITING_CALLS),
                ("grpc.server.max_pending_requests_hard_limit", MAX_WAITING_CALLS),
            ]
        )
        access = Access(s)
        access.hold = self.gate.refusal
        gate = CallGate(
            s.max_calls_in_flight, s.max_calls_waiting, self.metrics.calls_overloaded.inc
        )
        changes = self.changes = Changes(self.ledger.last_change)
        await changes.start()
        if not self.repo.is_sqlite:
            # Other replicas' commits wake this one's watchers at once, not at the next poll.
            self.listener = CommitListener(self.repo.url, changes.notify_threadsafe)
            self.listener.start()
        # Every commit (peer input and decay included) may change a served belief.
        self.ledger.on_commit(lambda _fx: changes.notify_threadsafe())
        self.writer = GroupCommit(self.ledger.ingest_each, self._committed(changes))
        self.writer.start()
        ctx = NodeContext(
            self.ledger,
            self.metrics,
            changes,
            s.listen,
            redact_url(s.db_url),
            self.writer,
            self.syncer,
            inline_reads=self.repo.is_sqlite_file,
            roster=self.roster,
            max_reply_bytes=s.max_message_bytes,
            watch_quota=StreamQuota(s.watch_streams_per_client),
            replica=replica_name(),
            restored=self.gate.restored,
        )
        add_service(server, FactServicer(ctx), "FactService", access, gate)
        add_service(server, ReviewServicer(ctx), "ReviewService", access, gate)
        add_service(server, AdminServicer(ctx), "AdminService", access, gate)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection(
            (
                *SERVICE_NAMES,
                health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                reflection.SERVICE_NAME,
            ),
            server,
        )
        if s.tls_enabled:
            assert s.tls_cert is not None and s.tls_key is not None
            creds = grpc.ssl_server_credentials(
                [(s.tls_key.read_bytes(), s.tls_cert.read_bytes())],
                root_certificates=s.tls_client_ca.read_bytes() if s.tls_client_ca else None,
                require_client_auth=False,
            )
            check_free(s.listen, "listen")
            port = server.add_secure_port(s.listen, creds)
        else:
            check_free(s.listen, "listen")
            port = server.add_insecure_port(s.listen)
        if port == 0:
            raise ConfigError("listen", f"could not bind {s.listen}")
        # With port 0 the OS picked the port: GetStatus reports the address clients can use.
        ctx.listen = f"{s.listen.rsplit(':', 1)[0]}:{port}"
        if self.store_lock is not None:
            self.store_lock.record(ctx.listen)
        await server.start()
        self.server, self.port = server, port
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        jobs: list[Job] = [self._decay_loop]
        if s.metrics_listen:
            host, _, metrics_port = s.metrics_listen.rpartition(":")
            self._metrics_server = serve_metrics(
                host.strip("[]"), int(metrics_port), self.metrics.registry, s.metrics_token
            )
            # Every replica serves its own /metrics, so each reads the gauges itself (a
            # read, outside the lease that runs the background work).
            self._gauges = asyncio.create_task(self._erasure_gauge_loop())
        if s.federated:
            await self._start_federation(options)
            assert self.syncer is not None
            jobs.append(self.syncer.run_forever)
        self.background = ctx.background = self._background(jobs, ctx.replica)
        self.background.start()
        return port

    def _background(self, jobs: list[Job], replica: str) -> Background:
        """Sync rounds and decay: on PostgreSQL under the lease that makes one replica run
        them (specification §10); on SQLite in this process, the store's only one."""
        lease = None if self.repo.is_sqlite else Lease(self.repo.url, self.node_id, replica)
        return Background(jobs, lease, replica, self.settings.lease_seconds)

    def _committed(self, changes: Changes) -> Callable[[list[Submitted]], None]:
        """What follows each group commit: decisions counted, belief watchers woken."""

        def after(done: list[Submitted]) -> None:
            self.metrics.decided([d.decision for d in done])
            changes.notify()

        return after

    async def refresh_erasure_gauges(self) -> None:
        """Reads how many erasures still wait for a current member's receipt, and the oldest
        one's time, into the metrics (one aggregate query)."""
        members = self.roster.membership() if self.roster is not None else {}
        count, oldest = await asyncio.to_thread(self.ledger.reading.unconfirmed_erasures, members)
        self.metrics.unconfirmed_erasures(count, oldest, self.ledger.clock.now)

    async def _erasure_gauge_loop(self) -> None:
        while True:
            try:
                await self.refresh_erasure_gauges()
            except Exception as exc:
                log.error("reading the erasure gauges failed: %s", type(exc).__name__)
            await asyncio.sleep(ERASURE_GAUGE_SECONDS)

    async def _decay_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.decay_interval_seconds)
            try:
                report = await asyncio.to_thread(self.ledger.run_decay)
                self.metrics.decay(report.decayed, report.tombstoned)
            except Exception as exc:
                # The type only: a traceback's message could quote a fact's value or source.
                log.error("decay round failed: %s", type(exc).__name__)

    async def stop(self, grace: float | None = None) -> None:
        """Reports NOT_SERVING, lets calls finish within the grace period, and closes the store."""
        await self.health.enter_graceful_shutdown()
        if self.background is not None:
            await self.background.stop()  # the lease goes to another replica at once
        grace = self.settings.grace_seconds if grace is None else grace
        if self.federation_server is not None:
            await self.federation_server.stop(grace)
        if self.server is not None:
            await self.server.stop(grace)
        if self.writer is not None:
            await self.writer.stop()  # after the calls: every queued submission is committed
        if self.listener is not None:
            await asyncio.to_thread(self.listener.stop)
        if self.changes is not None:
            await self.changes.stop()
        for link in self._links.values():
            await link.close()
        if self._gauges is not None:
            self._gauges.cancel()
            with suppress(asyncio.CancelledError):
                await self._gauges
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        self.repo.close()
        if self.store_lock is not None:
            self.store_lock.release()

    async def wait(self) -> None:
        assert self.server is not None
        await self.server.wait_for_termination()


def _trailer_sha256(stream: BinaryIO) -> str:
    """The checksum an export's trailer names ("" if its last line is not one)."""
    last = b""
    for line in stream:
        last = line
    try:
        found = json.loads(last).get("sha256", "")
    except (ValueError, AttributeError):
        return ""
    return found if isinstance(found, str) else ""


def _revocation_check(authority: Authority) -> Callable[[bytes], str]:
    """Why a revocation list an export carries is not the federation CA's, or ""."""

    def check(der: bytes) -> str:
        try:
            authority.revocation_list(der)
        except NotAMember as exc:
            return str(exc)
        return ""

    return check


def _lock_store(settings: Settings) -> StoreLock | None:
    """The lock of a SQLite file's store, held while this node runs (one process per store);
    ConfigError naming the data directory and its holder when another process has it."""
    url = make_url(settings.db_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    database = Path(url.database).resolve()
    setting = "data_dir" if settings.database_url is None else "database_url"
    try:
        return StoreLock(database, settings.listen)
    except StoreInUse as exc:
        raise ConfigError(setting, str(exc)) from None


def _setting_of(settings: Settings, path: str | None) -> str:
    """The setting that names `path`, for an error that says which file it could not read."""
    names = ("tls_cert", "tls_key", "tls_client_ca", "federation_cert", "federation_key")
    for name in (*names, "federation_ca"):
        value = getattr(settings, name)
        if value is not None and path is not None and str(value) == str(path):
            return name
    return "data_dir"


def startup_error(settings: Settings, exc: Exception) -> ConfigError:
    """A start-up failure as one line naming the setting; never a fact, never a traceback."""
    if isinstance(exc, ConfigError):
        return exc
    if isinstance(exc, OSError):
        return ConfigError(
            _setting_of(settings, exc.filename),
            f"cannot read {exc.filename or 'a file'}: {exc.strerror or type(exc).__name__}",
        )
    if isinstance(exc, SQLAlchemyError):
        # The driver's message names the host and the reason, not a row: no statement text.
        reason = str(getattr(exc, "orig", None) or type(exc).__name__).strip().splitlines()
        return ConfigError(
            "database_url",
            f"cannot open {redact_url(settings.db_url)}: {reason[0] if reason else ''}",
        )
    # grpc raises RuntimeError when it cannot bind or load the credentials.
    return ConfigError("listen", f"cannot start the server: {exc}")


async def start_node(
    settings: Settings, restore: Path | None = None, serve_before_sync: bool = False
) -> tuple[Node, int]:
    """A started node and its port; every start-up failure is a ConfigError."""
    node: Node | None = None
    try:
        node = Node(settings, restore=restore, serve_before_sync=serve_before_sync)
        return node, await node.start()
    except (ConfigError, OSError, SQLAlchemyError, RuntimeError) as exc:
        if node is not None:
            await node.stop(0)
        raise startup_error(settings, exc) from None


async def serve(
    settings: Settings,
    announce: Callable[[str], None] = print,
    restore: Path | None = None,
    serve_before_sync: bool = False,
) -> None:
    """Runs a node until SIGTERM or SIGINT, then shuts down gracefully. A signal that comes
    while the node is still starting stops it as soon as it has started. `restore` imports
    an export first (`Node`)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node, port = await start_node(settings, restore, serve_before_sync)
    host = settings.listen.rsplit(":", 1)[0]
    announce(f"factnode {node.node_id} listening on {host}:{port}")
    announce(f"store: {redact_url(settings.db_url)}")
    announce(f"event loop: {loop_name(loop)}")
    if node.federation_port:
        fed_host = (settings.federation_listen or "").rsplit(":", 1)[0]
        announce(
            f"federation (mTLS) on {fed_host}:{node.federation_port} with "
            f"{len(settings.peers)} peer(s) and {len(settings.seeds)} seed(s)"
        )
    if not settings.auth_enabled:
        announce(
            "no client tokens configured: listening on loopback only, every local caller is an operator"
        )
    await stop.wait()
    announce("shutting down")
    await node.stop()
