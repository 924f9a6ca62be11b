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
from collections.abc import Callable, Mapping
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
# Calls the client port runs at once, and calls that may wait for a place; one more is
# answered RESOURCE_EXHAUSTED with a retry push-back. One client (100 calls at once:
# client.DEFAULT_MAX_IN_FLIGHT) never meets the first; thirty busy ones are not refused.
DEFAULT_MAX_CALLS_IN_FLIGHT = 1000
DEFAULT_MAX_CALLS_WAITING = 2000


class ConfigError(ValueError):
    """A setting is invalid; names the setting and the reason."""

    def __init__(self, setting: str, reason: str) -> None:
        super().__init__(f"setting {setting!r}: {reason}")
        self.setting = setting
        self.reason = reason


class ConfigErrors(ConfigError):
    """Several settings are invalid: each one's error, in `errors`, and all in the message."""

    def __init__(self, errors: list[ConfigError]) -> None:
        lines = "\n".join(f"  {e}" for e in errors)
        super().__init__(errors[0].setting, f"and {len(errors) - 1} more")
        self.args = (f"{len(errors)} settings are invalid:\n{lines}",)
        self.errors = errors


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

    def may_read(self, namespace: str) -> bool:
        """Readers and writers read only in their namespaces (searches leave out the rest)."""
        if "operator" in self.roles:
            return True
        return bool(self.roles & {"reader", "writer"}) and any(
            fnmatch.fnmatchcase(namespace, p) for p in self.namespaces
        )

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
    # The fleet (specification §7): seeds are addresses dialed first (`[[peers]]` are seeds too);
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
    metrics_token: str | None = None  # the bearer token /metrics asks for; none: loopback only
    cache_keys: int = DEFAULT_CACHE_KEYS  # hot keys the write path keeps in memory; 0: none
    event_loop: str = "auto"  # one of EVENT_LOOPS: uvloop where installed, else asyncio's
    watch_streams_per_client: int = DEFAULT_WATCH_STREAMS_PER_CLIENT
    max_calls_in_flight: int = DEFAULT_MAX_CALLS_IN_FLIGHT
    max_calls_waiting: int = DEFAULT_MAX_CALLS_WAITING
    # PostgreSQL replicas (specification §10): the background-work lease is checked, and taken when
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


def check_token(where: str, value: Any) -> str:
    """A configured bearer token, checked by the one rule every face follows (specification
    §8: client, MCP and metrics tokens); the reason never quotes the secret itself."""
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
        token = check_token(f"{where}.token", item.get("token"))
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


# --- the settings, one row each ---------------------------------------------------------
#
# Every setting is one `Setting` in SETTINGS: its name in the file, the environment
# variable and `factnode serve` flag derived from it, how a value is checked and how text
# (from the environment or a flag) becomes a value, and its line in the reference page
# (docs/operations/configuration-reference.md, generated by `python -m factnode.docs`).
# Adding a setting: a field on `Settings` and a row here (tests/unit/test_config.py checks
# that every field has one).


def _text(text: str) -> Any:
    return text


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be a number, got {text!r}") from None


def _whole(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"must be a whole number, got {text!r}") from None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be JSON: {exc}") from None


def _json_or_text(text: str) -> Any:
    """A policy value: JSON where it parses (numbers, lists, tables), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _address(name: str, value: Any) -> str:
    address = _str(name, value)
    if ":" not in address or not address.rsplit(":", 1)[1].isdigit():
        raise ConfigError(name, f"must be host:port, got {address!r}")
    return address


def _comma_list(text: str) -> Any:
    return [a.strip() for a in text.split(",") if a.strip()]


def _seeds(name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ConfigError(name, 'must be a list of "host:port" addresses')
    return tuple(_address(f"{name}[{i}]", a) for i, a in enumerate(value))


def _member_caps(
    data: Mapping[str, Any], policy: Policy, peers: tuple[Peer, ...]
) -> tuple[dict[str, str], list[ConfigError]]:
    """The per-member caps (`[federation.max_anchor]`, node id = anchor, and `[[peers]]`'
    max_anchor), which go in the policy (`Policy.cap_for`); each bad entry is an error."""
    caps = {p.node_id: p.max_anchor for p in peers if p.max_anchor}
    found, raw = _lookup(data, "federation.max_anchor")
    if not found:
        return caps, []
    if not isinstance(raw, Mapping):
        return caps, [ConfigError("federation.max_anchor", 'must be a table of node_id = "anchor"')]
    errors = []
    for node_id, cap in raw.items():
        name = f"federation.max_anchor.{node_id}"
        if cap not in policy.anchors:
            errors.append(ConfigError(name, f"unknown anchor {cap!r}"))
        elif caps.get(node_id, cap) != cap:
            errors.append(ConfigError(name, "differs from the max_anchor its [[peers]] gives"))
        else:
            caps[node_id] = cap
    return caps, errors


def _at_least(least: int) -> Callable[[str, Any], int]:
    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(name, f"must be a whole number >= {least}, got {value!r}")
        return value

    return check


def _event_loop(name: str, value: Any) -> str:
    if value not in EVENT_LOOPS:
        raise ConfigError(name, f"must be one of {', '.join(EVENT_LOOPS)}, got {value!r}")
    return str(value)


def _as_given(name: str, value: Any) -> Any:
    return value  # checked with the rest of the policy (`policy_from_mapping`)


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: `name` in the file (dotted inside a table), the `Settings` field it sets
    (None for `policy.*`, which build the policy), how a value is checked (`check(name,
    value)` returns it converted or raises ConfigError), how text from the environment or a
    flag becomes a value, and its documentation."""

    name: str
    field: str | None
    check: Callable[[str, Any], Any]
    help: str
    default: str = "unset"
    text: Callable[[str], Any] = _text
    is_path: bool = False  # relative paths resolve against the file's directory
    env_name: str = ""  # when the variable predates the rule below

    @property
    def env(self) -> str:
        return self.env_name or "FACTNODE_" + self.name.upper().replace(".", "_")

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-").replace("_", "-")

    @property
    def dest(self) -> str:
        """The flag's argparse destination."""
        return self.flag[2:].replace("-", "_")


def _policy_row(name: str, help: str, default: str) -> Setting:
    return Setting(f"policy.{name}", None, _as_given, help, default, _json_or_text)


SETTINGS: tuple[Setting, ...] = (
    Setting("listen", "listen", _address, "host:port the gRPC client API listens on", DEFAULT_LISTEN),
    Setting("data_dir", "data_dir", _str, "where the SQLite store and its lock live",
            "$XDG_DATA_HOME/factnode", is_path=True),
    Setting("database_url", "database_url", _str,
            "SQLAlchemy URL of the store, e.g. postgresql+psycopg://user@host/db",
            "a SQLite file in data_dir"),
    Setting("node_id", "node_id", _str, "this node's id (persisted on first start)",
            "generated; a federated node: its certificate's name"),
    Setting("policy_file", "policy_file", _str, "a TOML policy file read before [policy]",
            is_path=True),
    Setting("tls.cert", "tls_cert", _str, "the client port's TLS certificate (with tls.key)",
            is_path=True),
    Setting("tls.key", "tls_key", _str, "the client port's TLS private key", is_path=True),
    Setting("tls.client_ca", "tls_client_ca", _str,
            "CA that client certificates must chain to (mutual TLS)", is_path=True),
    Setting("tokens", "tokens", lambda n, v: _tokens(v),
            "bearer tokens: a list of tables {token, roles, namespaces, name} (JSON in the "
            "environment and the flag; prefer the file or the environment: a flag shows in "
            "the process list)", "none: loopback only", _json),
    Setting("peers", "peers", lambda n, v: v,
            "peer nodes: a list of tables {address, node_id, max_anchor}", "none", _json),
    Setting("federation.listen", "federation_listen", _address,
            "host:port of the peer (mutual TLS) port", "off"),
    Setting("federation.cert", "federation_cert", _str, "this node's federation certificate",
            is_path=True),
    Setting("federation.key", "federation_key", _str, "its private key", is_path=True),
    Setting("federation.ca", "federation_ca", _str, "the federation's CA certificate",
            is_path=True),
    Setting("federation.sync_interval_seconds", "sync_interval_seconds", _positive,
            "seconds between sync rounds", "10", _number,
            env_name="FACTNODE_SYNC_INTERVAL_SECONDS"),
    Setting("federation.advertise", "federation_advertise", _address,
            "the address this node's member record gives the fleet",
            "federation.listen, with the port it bound"),
    Setting("federation.seeds", "seeds", _seeds,
            "addresses dialed first to join the fleet: a list of host:port (comma-separated "
            "in the environment and the flag)", "none", _comma_list, env_name="FACTNODE_SEEDS"),
    Setting("federation.max_anchor", None, _as_given,
            "the anchor each member's relayed evidence counts at most as, by node id: a table "
            "node_id = anchor ([[peers]]' max_anchor counts too)",
            "policy.default_max_anchor", _json),
    Setting("federation.fanout", "fanout", _at_least(0),
            "members per sync round, chosen at random among those known; 0: every member",
            "3", _whole, env_name="FACTNODE_FANOUT"),
    Setting("federation.accept_erasures_from", "accept_erasures_from",
            lambda n, v: _erasure_grants(v),
            "whose erasures apply here, for which namespaces: a list of tables "
            "{node, namespaces} (globs)", 'every member, every namespace', _json),
    Setting("grace_seconds", "grace_seconds", _positive,
            "seconds running calls get to finish at shutdown", "5", _number),
    Setting("max_message_bytes", "max_message_bytes",
            lambda n, v: int(_positive(n, v)),
            "the largest gRPC message sent or received", "4194304 (4 MiB)", _whole),
    Setting("decay_interval_seconds", "decay_interval_seconds", _positive,
            "seconds between decay runs", "3600", _number),
    Setting("metrics_listen", "metrics_listen", _address,
            "host:port for Prometheus /metrics", "off"),
    Setting("metrics_token", "metrics_token", check_token,
            "the bearer token /metrics asks for (Prometheus' `authorization` with "
            "`credentials_file`); needed for a non-loopback metrics_listen (prefer the file "
            "or the environment: a flag shows in the process list)", "none: loopback only"),
    Setting("cache_keys", "cache_keys", _at_least(0),
            "hot keys the write path keeps in memory; 0: none", str(DEFAULT_CACHE_KEYS), _whole),
    Setting("event_loop", "event_loop", _event_loop,
            "asyncio event loop: auto (uvloop where installed), uvloop or asyncio", "auto"),
    Setting("lease_seconds", "lease_seconds", _positive,
            "PostgreSQL replicas: the background-work lease is checked twice in this many "
            "seconds; a dead holder's work moves within two of them", "5", _number),
    Setting("watch_streams_per_client", "watch_streams_per_client", _at_least(1),
            "WatchBeliefs streams one token may hold open", str(DEFAULT_WATCH_STREAMS_PER_CLIENT),
            _whole),
    Setting("max_calls_in_flight", "max_calls_in_flight", _at_least(1),
            "calls the client port runs at once; more wait for a place (max_calls_waiting)",
            str(DEFAULT_MAX_CALLS_IN_FLIGHT), _whole),
    Setting("max_calls_waiting", "max_calls_waiting", _at_least(0),
            "calls that may wait, in arrival order, for a place to run; one more is answered "
            "RESOURCE_EXHAUSTED with a retry push-back, having done nothing",
            str(DEFAULT_MAX_CALLS_WAITING), _whole),
    _policy_row("anchors", "trust anchors and their values (a table; adds or changes)",
                "the specification's table"),
    _policy_row("half_life_days", "decay half-life per anchor in days (a table)",
                "0 (never) for the top three, 180 or 30"),
    _policy_row("min_confidence", "submissions below it are REJECTED; decay's floor", "0.4"),
    _policy_row("worth_margin", "how far worth must lead to decide", "0.2"),
    _policy_row("confidence_margin", "how far confidence must lead to decide", "0.0"),
    _policy_row("multi_valued", "predicates whose values never contradict (a list)",
                "knows, speaks, interested_in"),
    _policy_row("consensus_threshold", "share of the vote weight a version must exceed",
                "0.66"),
    _policy_row("vote_half_life_days", "days over which a vote's freshness halves", "30"),
    _policy_row("retain_decayed_days", "days evidence is kept after its expiry before the "
                "decay job purges it as an erasure does (\"never\": keep for ever)", "never"),
    _policy_row("protect_anchor", "local beliefs resting on this anchor or above are kept "
                "against consensus", "user_confirmed"),
    _policy_row("default_max_anchor", "the anchor a member's relayed evidence counts at most "
                "as, unless its peer entry says otherwise", "federation_received"),
    _policy_row("clock_skew_seconds", "how far in this node's future a peer's item may be "
                "dated", "300"),
    _policy_row("max_waiting_votes_per_peer", "votes of one peer that may wait for evidence",
                "10000"),
)  # fmt: skip
BY_NAME = {s.name: s for s in SETTINGS}
# Tables of the file whose keys are settings of their own.
_TABLES = {s.name.split(".", 1)[0] for s in SETTINGS if "." in s.name}


def _from_text(
    data: dict[str, Any], given: Mapping[str, str], where: Callable[[Setting], str]
) -> list[ConfigError]:
    """Puts each setting given as text (by `where(setting)`) into `data`, over the file."""
    errors = []
    for setting in SETTINGS:
        key = where(setting)
        if key not in given:
            continue
        try:
            value = setting.text(given[key])
        except ValueError as exc:
            errors.append(ConfigError(key, str(exc)))
            continue
        table = data
        *parents, leaf = setting.name.split(".")
        for p in parents:
            table = table.setdefault(p, {}) if isinstance(table.get(p, {}), dict) else {}
        table[leaf] = value
    return errors


def _read_file(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError("config", f"no such file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", f"not valid TOML: {exc}") from None


def _unknown(data: Mapping[str, Any]) -> list[ConfigError]:
    top = {s.name.split(".", 1)[0] for s in SETTINGS}
    errors = [
        ConfigError(name, f"unknown setting; known: {', '.join(sorted(top))}")
        for name in sorted(set(data) - top)
    ]
    for table in sorted(_TABLES - {"policy"}):
        held = data.get(table, {})
        if not isinstance(held, Mapping):
            errors.append(ConfigError(table, "must be a table"))
            continue
        known = {s.name.split(".", 1)[1] for s in SETTINGS if s.name.startswith(f"{table}.")}
        errors += [
            ConfigError(f"{table}.{k}", f"unknown setting; known: {', '.join(sorted(known))}")
            for k in sorted(set(held) - known)
        ]
    return errors


def _policy(data: Mapping[str, Any], base_dir: Path, errors: list[ConfigError]) -> Policy:
    """The policy file (if any) under [policy]; each bad policy value is its own error."""
    base = Policy()
    if "policy_file" in data:
        try:
            base = load_policy(_path("policy_file", data["policy_file"], base_dir))
        except (PolicyError, ConfigError) as exc:
            name = f"policy.{exc.field}" if isinstance(exc, PolicyError) else exc.setting
            errors.append(ConfigError(name, exc.reason))
    table = data.get("policy", {})
    if not isinstance(table, Mapping):
        errors.append(ConfigError("policy", "must be a table"))
        return base
    anchors = {"anchors": table["anchors"]} if "anchors" in table else {}
    failed = False
    for key in table:
        try:  # alone (with the anchors it may name), so every bad value is reported
            policy_from_mapping({**anchors, key: table[key]}, base)
        except PolicyError as exc:
            errors.append(ConfigError(f"policy.{exc.field}", exc.reason))
            failed = True
    if failed:
        return base
    try:
        return policy_from_mapping(table, base)
    except PolicyError as exc:
        errors.append(ConfigError(f"policy.{exc.field}", exc.reason))
        return base


def _path(name: str, value: Any, base_dir: Path) -> Path:
    p = Path(_str(name, value)).expanduser()
    return p if p.is_absolute() else base_dir / p


def _lookup(data: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    held: Any = data
    for part in name.split("."):
        if not isinstance(held, Mapping) or part not in held:
            return False, None
        held = held[part]
    return True, held


def load_settings(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, str] | None = None,
) -> Settings:
    """The settings from the TOML file (if any), `FACTNODE_*` variables in `env` over it,
    and `flags` (setting name to text, as `factnode serve` gives them) over both. Every bad
    setting is reported at once: one ConfigError, or ConfigErrors listing each by name."""
    env = os.environ if env is None else env
    path = path or env.get("FACTNODE_CONFIG")
    data = _read_file(path) if path else {}
    base_dir = Path(path).resolve().parent if path else Path.cwd()
    errors = _unknown(data)
    errors += _from_text(data, env, lambda s: s.env)
    errors += _from_text(data, flags or {}, lambda s: s.name)
    policy = _policy(data, base_dir, errors)
    changes: dict[str, Any] = {"policy": policy}
    for setting in SETTINGS:
        found, value = _lookup(data, setting.name)
        if not found or setting.field is None:
            continue
        try:
            if setting.is_path:
                changes[setting.field] = _path(setting.name, value, base_dir)
            else:
                changes[setting.field] = setting.check(setting.name, value)
        except ConfigError as exc:
            errors.append(exc)
    if "peers" in changes and not errors:
        try:
            changes["peers"] = _peers(changes["peers"], policy)
        except ConfigError as exc:
            errors.append(exc)
    if not errors:
        caps, bad_caps = _member_caps(data, policy, changes.get("peers", ()))
        errors += bad_caps
        if caps:
            changes["policy"] = replace(policy, member_caps=caps)
    if not errors:
        errors += _together(changes, policy)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)
    return replace(Settings(), **changes)


def _together(changes: Mapping[str, Any], policy: Policy) -> list[ConfigError]:
    """What settings require of each other."""
    errors = []
    if ("tls_cert" in changes) != ("tls_key" in changes):
        errors.append(ConfigError("tls", "cert and key go together"))
    if "federation_listen" in changes or changes.get("peers") or changes.get("seeds"):
        missing = [n for n in ("cert", "key", "ca") if f"federation_{n}" not in changes]
        if missing:
            errors.append(
                ConfigError(
                    f"federation.{missing[0]}",
                    "peer links are mutually authenticated: give federation cert, key and ca "
                    "(`factnode certs` makes development ones)",
                )
            )
        if "federation_listen" not in changes:
            errors.append(
                ConfigError(
                    "federation.listen",
                    "peers or seeds are configured but no federation listen address",
                )
            )
    return errors


def check_face(setting: str, listen: str, credentials: bool, missing: str) -> None:
    """Every face that listens follows one rule (specification §8): an address beyond loopback
    needs credentials configured for that face, or it refuses to start naming the setting;
    `missing` says which credentials and how to give them."""
    if not credentials and not is_loopback(listen):
        raise ConfigError(
            setting,
            f"{listen} is reachable from other machines but {missing}, or listen on 127.0.0.1",
        )


def check_exposure(settings: Settings) -> None:
    """Without credentials the node's gRPC port and its metrics stay on loopback."""
    check_face(
        "listen", settings.listen, settings.auth_enabled,
        "no client tokens are configured; add [[tokens]]",
    )  # fmt: skip
    if settings.metrics_listen:
        check_face(
            "metrics_listen", settings.metrics_listen, settings.metrics_token is not None,
            "no metrics_token is configured; set one (Prometheus sends it as a bearer token)",
        )  # fmt: skip
