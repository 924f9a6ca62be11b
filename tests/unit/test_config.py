"""Node settings: every setting from the file, the environment and a flag, from one table;
bad values refused by name, all at once."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest

from factnode.cli import build_parser
from factnode.config import (
    BY_NAME,
    SETTINGS,
    ConfigError,
    ConfigErrors,
    Peer,
    Settings,
    load_settings,
)
from factnode.core.peer_checks import ErasureGrant
from factnode.store.cache import DEFAULT_CACHE_KEYS


def _load(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> Settings:
    path = tmp_path / "factnode.toml"
    path.write_text(toml)
    return load_settings(path, env=env or {})


def test_cache_keys_defaults_and_can_be_set_or_turned_off(tmp_path: Path) -> None:
    assert _load(tmp_path, "").cache_keys == DEFAULT_CACHE_KEYS
    assert _load(tmp_path, "cache_keys = 500\n").cache_keys == 500
    assert _load(tmp_path, "cache_keys = 0\n").cache_keys == 0
    assert _load(tmp_path, "cache_keys = 500\n", {"FACTNODE_CACHE_KEYS": "7"}).cache_keys == 7


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        ("cache_keys = -1\n", None),
        ("cache_keys = 1.5\n", None),
        ("cache_keys = true\n", None),
        ('cache_keys = "many"\n', None),
        ("", {"FACTNODE_CACHE_KEYS": "lots"}),
    ],
    ids=["negative", "fraction", "bool", "string", "env-not-a-number"],
)
def test_a_bad_cache_size_is_refused_by_name(
    tmp_path: Path, toml: str, env: dict[str, str] | None
) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, toml, env)
    assert "CACHE_KEYS" in str(err.value).upper()


def test_event_loop_defaults_to_auto_and_can_be_chosen(tmp_path: Path) -> None:
    assert _load(tmp_path, "").event_loop == "auto"
    assert _load(tmp_path, 'event_loop = "asyncio"\n').event_loop == "asyncio"
    env = {"FACTNODE_EVENT_LOOP": "uvloop"}
    assert _load(tmp_path, 'event_loop = "asyncio"\n', env).event_loop == "uvloop"


@pytest.mark.parametrize(
    ("toml", "env"),
    [
        ('event_loop = "tokio"\n', None),
        ("event_loop = 1\n", None),
        ("", {"FACTNODE_EVENT_LOOP": ""}),
    ],
    ids=["unknown", "number", "env-empty"],
)
def test_a_bad_event_loop_is_refused_by_name(
    tmp_path: Path, toml: str, env: dict[str, str] | None
) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, toml, env)
    assert err.value.setting == "event_loop"
    assert "auto, uvloop, asyncio" in str(err.value)


def test_erasures_are_accepted_from_every_member_by_default_and_can_be_narrowed(
    tmp_path: Path,
) -> None:
    """Without accept_erasures_from every member's erasures apply in every namespace; the
    setting lists members (globs) with their namespaces (every one when left out)."""
    assert _load(tmp_path, "").accept_erasures_from == (ErasureGrant("*", ("*",)),)
    narrowed = _load(
        tmp_path,
        '[federation]\naccept_erasures_from = [{node = "n2", namespaces = ["user:*"]}, '
        '{node = "n3"}]\n',
    )
    assert narrowed.accept_erasures_from == (
        ErasureGrant("n2", ("user:*",)),
        ErasureGrant("n3", ("*",)),
    )


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('accept_erasures_from = "n2"', "federation.accept_erasures_from"),
        ("accept_erasures_from = [3]", "federation.accept_erasures_from[0]"),
        (
            'accept_erasures_from = [{namespaces = ["*"]}]',
            "federation.accept_erasures_from[0].node",
        ),
        (
            'accept_erasures_from = [{node = "n2", namespaces = "user:*"}]',
            "federation.accept_erasures_from[0].namespaces",
        ),
        (
            'accept_erasures_from = [{node = "n2", nodes = ["n3"]}]',
            "federation.accept_erasures_from[0].nodes",
        ),
    ],
)
def test_a_bad_erasure_grant_is_refused_by_name(tmp_path: Path, toml: str, field: str) -> None:
    """A malformed accept_erasures_from entry stops the node naming the entry's field."""
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, f"[federation]\n{toml}\n")
    assert refused.value.setting == field


def test_max_calls_in_flight_defaults_to_a_thousand_and_must_be_positive(tmp_path: Path) -> None:
    """max_calls_in_flight is 1,000 unless set; zero or a fraction is refused by name."""
    assert _load(tmp_path, "").max_calls_in_flight == 1000
    assert _load(tmp_path, "max_calls_in_flight = 5\n").max_calls_in_flight == 5
    for bad in ("0", "2.5"):
        with pytest.raises(ConfigError) as refused:
            _load(tmp_path, f"max_calls_in_flight = {bad}\n")
        assert refused.value.setting == "max_calls_in_flight"


def test_watch_streams_per_client_defaults_to_a_thousand_and_must_be_positive(
    tmp_path: Path,
) -> None:
    """watch_streams_per_client is 1,000 unless set; zero or a fraction is refused by name."""
    assert _load(tmp_path, "").watch_streams_per_client == 1000
    assert _load(tmp_path, "watch_streams_per_client = 5\n").watch_streams_per_client == 5
    for bad in ("0", "2.5", "true"):
        with pytest.raises(ConfigError) as refused:
            _load(tmp_path, f"watch_streams_per_client = {bad}\n")
        assert refused.value.setting == "watch_streams_per_client"


def test_lease_seconds_defaults_to_five_and_is_set_by_toml_or_environment(tmp_path: Path) -> None:
    """The replicas' lease interval: 5 s unless the file or FACTNODE_LEASE_SECONDS says."""
    assert _load(tmp_path, "").lease_seconds == 5.0
    assert _load(tmp_path, "lease_seconds = 2\n").lease_seconds == 2.0
    env = {"FACTNODE_LEASE_SECONDS": "0.5"}
    assert _load(tmp_path, "lease_seconds = 2\n", env).lease_seconds == 0.5


@pytest.mark.parametrize("value", ["0", "-1", '"soon"'])
def test_a_bad_lease_interval_is_refused_by_name(tmp_path: Path, value: str) -> None:
    """A lease interval that is not a positive number is refused, naming the setting."""
    with pytest.raises(ConfigError, match="lease_seconds"):
        _load(tmp_path, f"lease_seconds = {value}\n")


# --- every setting from one table ---------------------------------------------------------

# A valid value of each setting, as TOML and as text (environment or flag), and what it sets.
SAMPLES: dict[str, tuple[str, str, Callable[[Settings], object], object]] = {
    "listen": ('"0.0.0.0:7999"', "0.0.0.0:7999", lambda s: s.listen, "0.0.0.0:7999"),
    "data_dir": ('"/srv/fn"', "/srv/fn", lambda s: s.data_dir, Path("/srv/fn")),
    "database_url": ('"sqlite:///x.db"', "sqlite:///x.db", lambda s: s.database_url,
                     "sqlite:///x.db"),
    "node_id": ('"node-x"', "node-x", lambda s: s.node_id, "node-x"),
    "policy_file": ('"/etc/p.toml"', "/etc/p.toml", lambda s: s.policy_file, None),
    "tls.cert": ('"/c.pem"', "/c.pem", lambda s: s.tls_cert, Path("/c.pem")),
    "tls.key": ('"/k.pem"', "/k.pem", lambda s: s.tls_key, Path("/k.pem")),
    "tls.client_ca": ('"/ca.pem"', "/ca.pem", lambda s: s.tls_client_ca, Path("/ca.pem")),
    "tokens": ('[{token = "0123456789abcdef", roles = ["reader"]}]',
               '[{"token": "0123456789abcdef", "roles": ["reader"]}]',
               lambda s: sorted(s.tokens), ["0123456789abcdef"]),
    "peers": ('[{address = "h:1", node_id = "b"}]', '[{"address": "h:1", "node_id": "b"}]',
              lambda s: s.peers, (Peer("h:1", "b"),)),
    "federation.listen": ('"127.0.0.1:7421"', "127.0.0.1:7421", lambda s: s.federation_listen,
                          "127.0.0.1:7421"),
    "federation.cert": ('"/f.pem"', "/f.pem", lambda s: s.federation_cert, Path("/f.pem")),
    "federation.key": ('"/fk.pem"', "/fk.pem", lambda s: s.federation_key, Path("/fk.pem")),
    "federation.ca": ('"/fca.pem"', "/fca.pem", lambda s: s.federation_ca, Path("/fca.pem")),
    "federation.sync_interval_seconds": ("2.5", "2.5", lambda s: s.sync_interval_seconds, 2.5),
    "federation.fanout": ("5", "5", lambda s: s.fanout, 5),
    "federation.advertise": ('"10.0.0.1:7421"', "10.0.0.1:7421",
                             lambda s: s.federation_advertise, "10.0.0.1:7421"),
    "federation.seeds": ('["h:1", "g:2"]', "h:1,g:2", lambda s: s.seeds, ("h:1", "g:2")),
    "federation.max_anchor": ('{alpha = "user_stated"}', '{"alpha": "user_stated"}',
                              lambda s: s.policy.cap_for("alpha"), "user_stated"),
    "lease_seconds": ("2", "2", lambda s: s.lease_seconds, 2.0),
    "federation.accept_erasures_from": ('[{node = "a", namespaces = ["x:*"]}]',
                                        '[{"node": "a", "namespaces": ["x:*"]}]',
                                        lambda s: s.accept_erasures_from,
                                        (ErasureGrant("a", ("x:*",)),)),
    "grace_seconds": ("1.5", "1.5", lambda s: s.grace_seconds, 1.5),
    "max_message_bytes": ("1048576", "1048576", lambda s: s.max_message_bytes, 1048576),
    "decay_interval_seconds": ("60", "60", lambda s: s.decay_interval_seconds, 60.0),
    "metrics_listen": ('"127.0.0.1:9420"', "127.0.0.1:9420", lambda s: s.metrics_listen,
                       "127.0.0.1:9420"),
    "metrics_token": ('"scrape-token-0123456789"', "scrape-token-0123456789",
                      lambda s: s.metrics_token, "scrape-token-0123456789"),
    "cache_keys": ("7", "7", lambda s: s.cache_keys, 7),
    "event_loop": ('"asyncio"', "asyncio", lambda s: s.event_loop, "asyncio"),
    "watch_streams_per_client": ("5", "5", lambda s: s.watch_streams_per_client, 5),
    "max_calls_in_flight": ("50", "50", lambda s: s.max_calls_in_flight, 50),
    "max_calls_waiting": ("0", "0", lambda s: s.max_calls_waiting, 0),
    "policy.anchors": ("{internal_wiki = 75}", '{"internal_wiki": 75}',
                       lambda s: s.policy.anchors["internal_wiki"], 75),
    "policy.half_life_days": ("{llm_generated = 7}", '{"llm_generated": 7}',
                              lambda s: s.policy.half_life_days["llm_generated"], 7),
    "policy.min_confidence": ("0.5", "0.5", lambda s: s.policy.min_confidence_milli, 500),
    "policy.worth_margin": ("0.1", "0.1", lambda s: s.policy.worth_margin_milli, 100),
    "policy.confidence_margin": ("0.05", "0.05", lambda s: s.policy.confidence_margin_milli, 50),
    "policy.multi_valued": ('["likes"]', '["likes"]', lambda s: s.policy.multi_valued,
                            frozenset({"likes"})),
    "policy.consensus_threshold": ("0.75", "0.75", lambda s: s.policy.consensus_threshold,
                                   Fraction(3, 4)),
    "policy.vote_half_life_days": ("10", "10", lambda s: s.policy.vote_half_life_days, 10),
    "policy.retain_decayed_days": ("90", "90", lambda s: s.policy.retain_decayed_days, 90),
    "policy.protect_anchor": ('"user_stated"', "user_stated", lambda s: s.policy.protect_anchor,
                              "user_stated"),
    "policy.default_max_anchor": ('"llm_generated"', "llm_generated",
                                  lambda s: s.policy.default_max_anchor, "llm_generated"),
    "policy.clock_skew_seconds": ("60", "60", lambda s: s.policy.clock_skew_seconds, 60),
    "policy.max_waiting_votes_per_peer": ("9", "9",
                                          lambda s: s.policy.max_waiting_votes_per_peer, 9),
}  # fmt: skip
# Settings that need others beside them (given in the file in every case).
COMPANIONS = {
    "tls.cert": 'tls = {key = "/k.pem"}\n',
    "tls.key": 'tls = {cert = "/c.pem"}\n',
    "peers": 'federation = {listen = "127.0.0.1:7421", cert = "/f", key = "/k", ca = "/c"}\n',
    "federation.listen": 'federation = {cert = "/f", key = "/k", ca = "/c"}\n',
    "federation.seeds": 'federation = {listen = "127.0.0.1:7421", cert = "/f", key = "/k", '
    'ca = "/c"}\n',
}


def _toml(name: str, literal: str) -> str:
    """`name = literal` as TOML, inside its table when the name is dotted."""
    *table, leaf = name.split(".")
    return f"[{table[0]}]\n{leaf} = {literal}\n" if table else f"{name} = {literal}\n"


def _merged(name: str, literal: str) -> str:
    """The setting and its companions in one file (a table may be named once)."""
    companion = COMPANIONS.get(name, "")
    *table, leaf = name.split(".")
    if table and companion.startswith(f"{table[0]} = {{"):
        inner = companion.split("{", 1)[1].rsplit("}", 1)[0]
        return f"{table[0]} = {{{inner}, {leaf} = {literal}}}\n"
    return companion + _toml(name, literal)


def test_every_settings_field_has_a_row_in_the_table() -> None:
    """Each field of Settings (the policy aside, which the policy.* rows build) is set by
    exactly one row of SETTINGS, and every row has a sample in this test."""
    fields = set(Settings.__dataclass_fields__) - {"policy"}
    rows = [s.field for s in SETTINGS if s.field is not None]
    assert sorted(rows) == sorted(fields)
    assert set(SAMPLES) == {s.name for s in SETTINGS}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_setting_can_be_set_by_file_environment_and_flag(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every setting takes its value from the file, from its FACTNODE_* variable over the
    file, and from its `factnode serve` flag over both."""
    literal, text, read, expected = SAMPLES[name]
    setting = BY_NAME[name]
    if name == "policy_file":
        policy = tmp_path / "p.toml"
        policy.write_text("min_confidence = 0.7\n")
        literal, text = f'"{policy}"', str(policy)
        read, expected = (lambda s: s.policy.min_confidence_milli), 700
    companion = COMPANIONS.get(name, "")
    assert read(_load(tmp_path, _merged(name, literal))) == expected
    assert read(_load(tmp_path, companion, {setting.env: text})) == expected
    path = tmp_path / "factnode.toml"
    path.write_text(companion)
    args = build_parser().parse_args(["serve", "--config", str(path), setting.flag, text])
    flags = {s.name: getattr(args, s.dest) for s in SETTINGS if getattr(args, s.dest)}
    assert read(load_settings(path, {}, flags)) == expected


def test_a_flag_beats_the_environment_which_beats_the_file(tmp_path: Path) -> None:
    """Where one setting is given three ways, the flag wins, then the environment."""
    env = {"FACTNODE_CACHE_KEYS": "8"}
    path = tmp_path / "factnode.toml"
    path.write_text("cache_keys = 7\n")
    assert load_settings(path, env).cache_keys == 8
    assert load_settings(path, env, {"cache_keys": "9"}).cache_keys == 9


def test_a_bad_file_lists_every_error_by_name(tmp_path: Path) -> None:
    """A file with several bad settings is refused with all of them, each by its name,
    policy values and table members included."""
    toml = (
        'listen = "nowhere"\ncache_keys = -2\nbogus = 1\n'
        "[federation]\nfanout = -1\nspeed = 3\n"
        '[policy]\nmin_confidence = 2\nprotect_anchor = "nobody"\n'
    )
    with pytest.raises(ConfigErrors) as err:
        _load(tmp_path, toml, {"FACTNODE_GRACE_SECONDS": "soon"})
    named = sorted(e.setting for e in err.value.errors)
    assert named == [
        "FACTNODE_GRACE_SECONDS",
        "bogus",
        "cache_keys",
        "federation.fanout",
        "federation.speed",
        "listen",
        "policy.min_confidence",
        "policy.protect_anchor",
    ]
    text = str(err.value)
    assert text.startswith("8 settings are invalid:")
    assert all(f"setting {n!r}" in text for n in named)
