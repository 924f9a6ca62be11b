"""Node settings: one TOML file plus `FACTNODE_*` environment overrides.

Nothing here connects to anything; the composition root (`factnode.server.app`) builds
the node from a `Settings` value.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from factnode.core import Policy, PolicyError, load_policy, policy_from_mapping
from factnode.core.peer_checks import ACCEPT_ALL_ERASURES, ErasureGrant

DEFAULT_LISTEN = "127.0.0.1:7420"
# Hot keys the write path keeps in memory. The store has the same default for a repository
# opened without settings (`factnode.store.cache`); config does not import the store, and
# tests/integration/test_store.py pins the two equal.
DEFAULT_CACHE_KEYS = 20_000
# `auto`: uvloop where it is installed (a dependency on Linux and macOS), else asyncio's own.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
ROLES = ("reader", "writer", "operator")
# WatchBeliefs streams one client (token, or address without tokens) may hold open at once.
DEFAULT_WATCH_STREAMS_PER_CLIENT = 1000


class ConfigError(ValueError):
    """A setting is invalid; names the setting and the reason."""

    def __init__(self, setting: str, reason: str) -> None:
        super().__init__(f"setting {setting!r}: {reason}")
        self.setting = setting
        self.reason = reason


@dataclass(frozen=True, slots=True)
class TokenGrant:
    """What a bearer token may do: roles, and for writers the namespaces (glob patterns)."""

    roles: frozenset[str]
    namespaces: tuple[str, ...] = ("*",)
    name: str = ""

    def may(self, role: str) -> bool:
        """Operators may do everything; writers may also read."""
        if "operator" in self.roles:
            return True
        if role == "reader":
            return bool(self.roles & {"reader", "writer"})
        return role in self.roles

    def may_write(self, namespace: str) -> bool:
        """Writers write only in their namespaces."""
        if "operator" in self.roles:
            return True
        return "writer" in self.roles and any(
            fnmatch.fnmatchcase(namespace, p) for p in self.namespaces
        )


@dataclass(frozen=True, slots=True)
class Peer:
    """A peer node: where it listens, the node id its certificate must name, its anchor cap."""

    address: str
    node_id: str
    max_anchor: str | None = None


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything a node needs to start."""

    listen: str = DEFAULT_LISTEN
    data_dir: Path = field(default_factory=lambda: default_data_dir())
    database_url: str | None = None
    node_id: str | None = None
    policy: Policy = field(default_factory=Policy)
    policy_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    tokens: Mapping[str, TokenGrant] = field(default_factory=dict)
    peers: tuple[Peer, ...] = ()
    federation_listen: str | None = None
    federation_cert: Path | None = None
    federation_key: Path | None = None
    federation_ca: Path | None = None
    sync_interval_seconds: float = 10.0
    # The fleet (DESIGN §7): seeds are addresses dialed first (`[[peers]]` are seeds too);
    # members are learned from their signed records. Each round syncs with `fanout` members
    # chosen at random (0: every member). `federation_advertise` is the address this node's
    # member record gives (default: federation.listen, with the port it bound).
    seeds: tuple[str, ...] = ()
    fanout: int = 3
    federation_advertise: str | None = None
    # Whose erasures this node applies, for which namespaces (`federation.accept_erasures_from`).
    accept_erasures_from: tuple[ErasureGrant, ...] = ACCEPT_ALL_ERASURES
    grace_seconds: float = 5.0
    max_message_bytes: int = 4 * 1024 * 1024
    decay_interval_seconds: float = 3600.0
    metrics_listen: str | None = None  # host:port for Prometheus /metrics; off when unset
    cache_keys: int = DEFAULT_CACHE_KEYS  # hot keys the write path keeps in memory; 0: none
    event_loop: str = "auto"  # one of EVENT_LOOPS: uvloop where installed, else asyncio's
    watch_streams_per_client: int = DEFAULT_WATCH_STREAMS_PER_CLIENT
    # PostgreSQL replicas (DESIGN §10): the background-work lease is checked, and taken when
    # free, twice every `lease_seconds`; a dead holder's work moves within two of them.
    lease_seconds: float = 5.0

    @property
    def db_url(self) -> str:
        """The database URL: configured, or a SQLite file in the data directory."""
        return self.database_url or f"sqlite:///{self.data_dir / 'factnode.db'}"

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens)

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None

    @property
    def federated(self) -> bool:
        return self.federation_listen is not None


def default_data_dir() -> Path:
    """$XDG_DATA_HOME/factnode, else ~/.local/share/factnode."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "factnode"


def is_loopback(listen: str) -> bool:
    """True when an address only accepts connections from this machine."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redact_url(url: str) -> str:
    """A database URL safe to print: the password is replaced."""
    if "://" not in url or "@" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else url


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, f"must be a non-empty string, got {value!r}")
    return value


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(name, f"must be a positive number, got {value!r}")
    return float(value)


# A bearer token must be long enough not to be guessed and exactly what a client sends:
# clients strip the header value, so surrounding whitespace could never match.
MIN_TOKEN_CHARS = 16
# RFC 9110 header value characters without spaces (visible ASCII): a token is one word.
_TOKEN_CHARS = re.compile(r"[\x21-\x7e]+")


def _token(where: str, value: Any) -> str:
    """A configured bearer token, checked; the reason never quotes the secret itself."""
    if not isinstance(value, str) or not value:
        raise ConfigError(where, "must be a non-empty string")
    if value != value.strip():
        raise ConfigError(where, "has spaces or newlines around it, so no client could send it")
    if len(value) < MIN_TOKEN_CHARS:
        raise ConfigError(
            where, f"is {len(value)} characters long; give at least {MIN_TOKEN_CHARS}"
        )
    if not _TOKEN_CHARS.fullmatch(value):
        raise ConfigError(where, "may hold only visible ASCII characters (no spaces or controls)")
    return value


def _tokens(raw: Any) -> dict[str, TokenGrant]:
    if not isinstance(raw, list):
        raise ConfigError("tokens", "must be a list of tables with token and roles")
    out: dict[str, TokenGrant] = {}
    for i, item in enumerate(raw):
        where = f"tokens[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, "must be a table with token and roles")
        token = _token(f"{where}.token", item.get("token"))
        if token in out:
            raise ConfigError(f"{where}.token", "is the same as an earlier token's")
        roles = item.get("roles")
        if not isinstance(roles, list) or not roles or any(r not in ROLES for r in roles):
            raise ConfigError(f"{where}.roles", f"must be a non-empty list of {', '.join(ROLES)}")
        namespaces = item.get("namespaces", ["*"])
        if not isinstance(namespaces, list) or not all(
            isinstance(n, str) and n for n in namespaces
        ):
            raise ConfigError(f"{where}.namespaces", "must be a list of namespace patterns")
        out[token] = TokenGrant(frozenset(roles), tuple(namespaces), str(item.get("name", "")))
    return out


def _peers(raw: Any, policy: Policy) -> tuple[Peer, ...]:
    if not isinstance(raw, list):
        raise ConfigError("peers", "must be a list of tables with address and node_id")
    out = []
    for i, item in enumerate(raw):
        where = f"peers[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, "must be a table with address and node_id")
        cap = item.get("max_anchor")
        if cap is not None and cap not in policy.anchors:
            raise ConfigError(f"{where}.max_anchor", f"unknown anchor {cap!r}")
        out.append(
            Peer(
                _str(f"{where}.address", item.get("address")),
                _str(f"{where}.node_id", item.get("node_id")),
                cap,
            )
        )
    return tuple(out)


def _erasure_grants(raw: Any) -> tuple[ErasureGrant, ...]:
    name = "federation.accept_erasures_from"
    if not isinstance(raw, list):
        raise ConfigError(name, 'must be a list of tables like {node = "*", namespaces = ["*"]}')
    out = []
    for i, item in enumerate(raw):
        where = f"{name}[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigError(where, "must be a table with node and namespaces")
        unknown = sorted(set(item) - {"node", "namespaces"})
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}", "unknown setting; known: namespaces, node")
        namespaces = item.get("namespaces", ["*"])
        if not isinstance(namespaces, list) or not all(
            isinstance(n, str) and n.strip() for n in namespaces
        ):
            raise ConfigError(f"{where}.namespaces", "must be a list of namespace patterns")
        out.append(ErasureGrant(_str(f"{where}.node", item.get("node")), tuple(namespaces)))
    return tuple(out)


_FEDERATION_SETTINGS = {
    "listen",
    "advertise",
    "cert",
    "key",
    "ca",
    "sync_interval_seconds",
    "fanout",
    "accept_erasures_from",
    "seeds",
    "max_anchor",
}


def _address(name: str, value: Any) -> str:
    address = _str(name, value)
    if ":" not in address or not address.rpartition(":")[2].isdigit():
        raise ConfigError(name, f"must be host:port, got {address!r}")
    return address


def _fleet(fed: Mapping[str, Any], policy: Policy, peers: tuple[Peer, ...]) -> dict[str, Any]:
    """`federation.seeds` and the per-member caps (`[federation.max_anchor]`, node id = anchor,
    and `[[peers]]`' max_anchor), which go in the policy (`Policy.cap_for`)."""
    out: dict[str, Any] = {}
    if "seeds" in fed:
        raw = fed["seeds"]
        if not isinstance(raw, list):
            raise ConfigError("federation.seeds", 'must be a list of "host:port" addresses')
        out["seeds"] = tuple(_address(f"federation.seeds[{i}]", a) for i, a in enumerate(raw))
    caps = {p.node_id: p.max_anchor for p in peers if p.max_anchor}
    raw_caps = fed.get("max_anchor", {})
    if not isinstance(raw_caps, Mapping):
        raise ConfigError("federation.max_anchor", 'must be a table of node_id = "anchor"')
    for node_id, cap in raw_caps.items():
        if cap not in policy.anchors:
            raise ConfigError(f"federation.max_anchor.{node_id}", f"unknown anchor {cap!r}")
        if caps.get(node_id, cap) != cap:
            raise ConfigError(
                f"federation.max_anchor.{node_id}",
                "differs from the max_anchor its [[peers]] gives",
            )
        caps[node_id] = cap
    if caps:
        out["policy"] = replace(policy, member_caps=caps)
    return out


_ENV = {
    "FACTNODE_LISTEN": "listen",
    "FACTNODE_DATA_DIR": "data_dir",
    "FACTNODE_DATABASE_URL": "database_url",
    "FACTNODE_NODE_ID": "node_id",
    "FACTNODE_POLICY_FILE": "policy_file",
    "FACTNODE_TLS_CERT": "tls.cert",
    "FACTNODE_TLS_KEY": "tls.key",
    "FACTNODE_TLS_CLIENT_CA": "tls.client_ca",
    "FACTNODE_TOKENS": "tokens",
    "FACTNODE_PEERS": "peers",
    "FACTNODE_FEDERATION_LISTEN": "federation.listen",
    "FACTNODE_FEDERATION_CERT": "federation.cert",
    "FACTNODE_FEDERATION_KEY": "federation.key",
    "FACTNODE_FEDERATION_CA": "federation.ca",
    "FACTNODE_SYNC_INTERVAL_SECONDS": "federation.sync_interval_seconds",
    "FACTNODE_FANOUT": "federation.fanout",
    "FACTNODE_SEEDS": "federation.seeds",
    "FACTNODE_GRACE_SECONDS": "grace_seconds",
    "FACTNODE_METRICS_LISTEN": "metrics_listen",
    "FACTNODE_CACHE_KEYS": "cache_keys",
    "FACTNODE_EVENT_LOOP": "event_loop",
    "FACTNODE_LEASE_SECONDS": "lease_seconds",
}


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> None:
    for var, path in _ENV.items():
        if var not in env:
            continue
        value: Any = env[var]
        if path in ("tokens", "peers"):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(var, f"must be JSON (a list of tables): {exc}") from None
        elif path in ("federation.sync_interval_seconds", "grace_seconds", "lease_seconds"):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(var, f"must be a number, got {value!r}") from None
        elif path == "federation.seeds":
            value = [a.strip() for a in value.split(",") if a.strip()]
        elif path in ("federation.fanout", "cache_keys"):
            try:
                value = int(value)
            except ValueError:
                raise ConfigError(var, f"must be a whole number, got {value!r}") from None
        table = data
        *parents, leaf = path.split(".")
        for p in parents:
            table = table.setdefault(p, {})
        table[leaf] = value


def load_settings(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Reads the TOML file (if any) and applies `FACTNODE_*` overrides from `env`."""
    env = os.environ if env is None else env
    path = path or env.get("FACTNODE_CONFIG")
    data: dict[str, Any] = {}
    base_dir = Path.cwd()
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError("config", f"no such file: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError("config", f"not valid TOML: {exc}") from None
        base_dir = Path(path).resolve().parent
    _apply_env(data, env)

    def rel(value: Any, name: str) -> Path:
        p = Path(_str(name, value)).expanduser()
        return p if p.is_absolute() else base_dir / p

    known = {
        "listen",
        "data_dir",
        "database_url",
        "node_id",
        "policy_file",
        "policy",
        "tls",
        "tokens",
        "peers",
        "federation",
        "grace_seconds",
        "max_message_bytes",
        "decay_interval_seconds",
        "metrics_listen",
        "cache_keys",
        "event_loop",
        "watch_streams_per_client",
        "lease_seconds",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(unknown[0], f"unknown setting; known: {', '.join(sorted(known))}")

    try:
        policy_file = rel(data["policy_file"], "policy_file") if "policy_file" in data else None
        policy = load_policy(policy_file) if policy_file else Policy()
        if "policy" in data:
            policy = policy_from_mapping(data["policy"], policy)
    except PolicyError as exc:
        raise ConfigError(f"policy.{exc.field}", exc.reason) from None

    settings = Settings(policy=policy, policy_file=policy_file)
    changes: dict[str, Any] = {}
    if "listen" in data:
        listen = _str("listen", data["listen"])
        if ":" not in listen:
            raise ConfigError("listen", f"must be host:port, got {listen!r}")
        changes["listen"] = listen
    if "data_dir" in data:
        changes["data_dir"] = rel(data["data_dir"], "data_dir")
    if "database_url" in data:
        changes["database_url"] = _str("database_url", data["database_url"])
    if "node_id" in data:
        changes["node_id"] = _str("node_id", data["node_id"])
    tls = data.get("tls", {})
    for name in ("cert", "key", "client_ca"):
        if name in tls:
            changes[f"tls_{name}"] = rel(tls[name], f"tls.{name}")
    if ("tls_cert" in changes) != ("tls_key" in changes):
        raise ConfigError("tls", "cert and key go together")
    if "tokens" in data:
        changes["tokens"] = _tokens(data["tokens"])
    if "peers" in data:
        changes["peers"] = _peers(data["peers"], policy)
    fed = data.get("federation", {})
    unknown_fed = sorted(set(fed) - _FEDERATION_SETTINGS)
    if unknown_fed:
        raise ConfigError(
            f"federation.{unknown_fed[0]}",
            f"unknown setting; known: {', '.join(sorted(_FEDERATION_SETTINGS))}",
        )
    for name in ("listen", "advertise"):
        if name in fed:
            changes[f"federation_{name}"] = _address(f"federation.{name}", fed[name])
    changes.update(_fleet(fed, policy, changes.get("peers", ())))
    for name in ("cert", "key", "ca"):
        if name in fed:
            changes[f"federation_{name}"] = rel(fed[name], f"federation.{name}")
    if "federation_listen" in changes or changes.get("peers") or changes.get("seeds"):
        missing = [n for n in ("cert", "key", "ca") if f"federation_{n}" not in changes]
        if missing:
            raise ConfigError(
                f"federation.{missing[0]}",
                "peer links are mutually authenticated: give federation cert, key and ca "
                "(`factnode certs` makes development ones)",
            )
        if "federation_listen" not in changes:
            raise ConfigError(
                "federation.listen",
                "peers or seeds are configured but no federation listen address",
            )
    if "sync_interval_seconds" in fed:
        changes["sync_interval_seconds"] = _positive(
            "federation.sync_interval_seconds", fed["sync_interval_seconds"]
        )
    if "fanout" in fed:
        fanout = fed["fanout"]
        if isinstance(fanout, bool) or not isinstance(fanout, int) or fanout < 0:
            raise ConfigError("federation.fanout", f"must be a whole number >= 0, got {fanout!r}")
        changes["fanout"] = fanout
    if "accept_erasures_from" in fed:
        changes["accept_erasures_from"] = _erasure_grants(fed["accept_erasures_from"])
    for name in ("grace_seconds", "decay_interval_seconds", "lease_seconds"):
        if name in data:
            changes[name] = _positive(name, data[name])
    if "metrics_listen" in data:
        metrics = _str("metrics_listen", data["metrics_listen"])
        if ":" not in metrics or not metrics.rsplit(":", 1)[1].isdigit():
            raise ConfigError("metrics_listen", f"must be host:port, got {metrics!r}")
        changes["metrics_listen"] = metrics
    if "cache_keys" in data:
        keys = data["cache_keys"]
        if isinstance(keys, bool) or not isinstance(keys, int) or keys < 0:
            raise ConfigError("cache_keys", f"must be a whole number >= 0, got {keys!r}")
        changes["cache_keys"] = keys
    if "event_loop" in data:
        loop = data["event_loop"]
        if loop not in EVENT_LOOPS:
            raise ConfigError(
                "event_loop", f"must be one of {', '.join(EVENT_LOOPS)}, got {loop!r}"
            )
        changes["event_loop"] = loop
    if "watch_streams_per_client" in data:
        most = data["watch_streams_per_client"]
        if isinstance(most, bool) or not isinstance(most, int) or most < 1:
            raise ConfigError(
                "watch_streams_per_client", f"must be a whole number >= 1, got {most!r}"
            )
        changes["watch_streams_per_client"] = most
    if "max_message_bytes" in data:
        changes["max_message_bytes"] = int(
            _positive("max_message_bytes", data["max_message_bytes"])
        )
    return replace(settings, **changes)


def check_exposure(settings: Settings) -> None:
    """Without credentials the node must not listen beyond loopback."""
    if not settings.auth_enabled and not is_loopback(settings.listen):
        raise ConfigError(
            "listen",
            f"{settings.listen} is reachable from other machines but no client tokens are "
            "configured; add [[tokens]] or listen on 127.0.0.1",
        )
