"""Node settings: the write cache's size from TOML or the environment, and bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from factnode.config import ConfigError, Settings, load_settings
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
