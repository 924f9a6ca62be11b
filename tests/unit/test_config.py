"""Node settings: the write cache's size from TOML or the environment, and bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from factnode.config import ConfigError, Settings, load_settings
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
