"""Configured bearer tokens are checked on load: exact, long enough, one word, unique."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factnode.config import MIN_TOKEN_CHARS, ConfigError, Settings, load_settings

GOOD = "a" * MIN_TOKEN_CHARS


def _with_tokens(tmp_path: Path, *tokens: str, env: bool = False) -> Settings:
    items = [{"token": t, "roles": ["operator"]} for t in tokens]
    if env:
        return load_settings(None, env={"FACTNODE_TOKENS": json.dumps(items)})
    path = tmp_path / "factnode.toml"
    path.write_text("".join(f"[[tokens]]\ntoken = {json.dumps(t)}\nroles = [\"operator\"]\n"
                            for t in tokens))  # fmt: skip
    return load_settings(path, env={})


@pytest.mark.parametrize("env", [False, True], ids=["toml", "env"])
def test_a_token_of_the_minimum_length_is_accepted_as_given(tmp_path: Path, env: bool) -> None:
    """A visible-ASCII token of MIN_TOKEN_CHARS characters loads unchanged, from TOML or env."""
    assert list(_with_tokens(tmp_path, GOOD, env=env).tokens) == [GOOD]


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (f" {GOOD}", "spaces or newlines around it"),
        (f"{GOOD} ", "spaces or newlines around it"),
        (f"{GOOD}\n", "spaces or newlines around it"),
        ("a" * (MIN_TOKEN_CHARS - 1), f"at least {MIN_TOKEN_CHARS}"),
        (f"{GOOD[:8]} {GOOD[8:]}", "visible ASCII"),
        (f"{GOOD}\x1b", "visible ASCII"),
        (f"{GOOD}é", "visible ASCII"),
        ("", "non-empty"),
    ],
    ids=[
        "leading-space",
        "trailing-space",
        "newline",
        "too-short",
        "inner-space",
        "control",
        "non-ascii",
        "empty",
    ],
)
@pytest.mark.parametrize("env", [False, True], ids=["toml", "env"])
def test_a_token_no_client_could_send_or_too_easy_to_guess_is_a_config_error(
    tmp_path: Path, token: str, reason: str, env: bool
) -> None:
    """A token with surrounding whitespace, too short, or with spaces, controls or non-ASCII is
    refused naming the setting (tokens[0].token) and never quoting the token."""
    with pytest.raises(ConfigError) as err:
        _with_tokens(tmp_path, token, env=env)
    assert err.value.setting == "tokens[0].token"
    assert reason in err.value.reason
    if token.strip():
        assert token.strip() not in str(err.value)


def test_the_same_token_twice_is_a_config_error(tmp_path: Path) -> None:
    """Two entries with one token would silently keep only the last one's roles: refused."""
    with pytest.raises(ConfigError) as err:
        _with_tokens(tmp_path, GOOD, GOOD)
    assert err.value.setting == "tokens[1].token"
