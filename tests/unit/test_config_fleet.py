"""The fleet's settings: seeds (addresses only), per-member caps by node id, fanout."""

from __future__ import annotations

from pathlib import Path

import pytest

from factnode.config import ConfigError, Settings, load_settings

FEDERATION = """
[federation]
listen = "127.0.0.1:7421"
cert = "n.crt"
key = "n.key"
ca = "ca.crt"
"""


def _load(tmp_path: Path, toml: str, env: dict[str, str] | None = None) -> Settings:
    path = tmp_path / "factnode.toml"
    path.write_text(toml)
    return load_settings(path, env=env or {})


def test_seeds_are_addresses_and_fanout_defaults_to_three(tmp_path: Path) -> None:
    """`federation.seeds` lists host:port addresses (or FACTNODE_SEEDS, comma-separated);
    a round syncs with three members unless `fanout` says otherwise."""
    s = _load(tmp_path, FEDERATION + 'seeds = ["10.0.0.1:7421", "seed.example:7421"]\n')
    assert s.seeds == ("10.0.0.1:7421", "seed.example:7421")
    assert s.fanout == 3
    env = _load(tmp_path, FEDERATION, {"FACTNODE_SEEDS": "a:1, b:2"})
    assert env.seeds == ("a:1", "b:2")
    assert _load(tmp_path, FEDERATION + "fanout = 0\n").fanout == 0


def test_caps_are_set_by_node_id_and_peers_keep_theirs(tmp_path: Path) -> None:
    """`[federation.max_anchor]` maps node ids to anchors; `[[peers]]`' max_anchor counts
    too; `Policy.cap_for` answers for any member, `federation_received` when unnamed."""
    s = _load(
        tmp_path,
        FEDERATION
        + '[federation.max_anchor]\nalpha = "user_stated"\n'
        + '\n[[peers]]\naddress = "127.0.0.1:7422"\nnode_id = "beta"\nmax_anchor = "agent_observed"\n',
    )
    assert s.policy.cap_for("alpha") == "user_stated"
    assert s.policy.cap_for("beta") == "agent_observed"
    assert s.policy.cap_for("gamma") == "federation_received"


@pytest.mark.parametrize(
    ("toml", "field"),
    [
        ('seeds = "a:1"', "federation.seeds"),
        ('seeds = ["no-port"]', "federation.seeds[0]"),
        ('seeds = ["a:1", 7]', "federation.seeds[1]"),
        ('max_anchor = "user_stated"', "federation.max_anchor"),
        ('[federation.max_anchor]\nalpha = "gold"', "federation.max_anchor.alpha"),
        ('advertise = "nowhere"', "federation.advertise"),
        ("members = 3", "federation.members"),
    ],
)
def test_a_bad_fleet_setting_is_refused_by_name(tmp_path: Path, toml: str, field: str) -> None:
    """A malformed seed, cap or unknown federation setting stops the node naming the field."""
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, FEDERATION + toml + "\n")
    assert refused.value.setting == field


def test_a_cap_given_twice_differently_is_refused(tmp_path: Path) -> None:
    """A member capped one way in [[peers]] and another in [federation.max_anchor] is an error."""
    with pytest.raises(ConfigError) as refused:
        _load(
            tmp_path,
            FEDERATION
            + '[federation.max_anchor]\nbeta = "user_stated"\n'
            + '\n[[peers]]\naddress = "h:1"\nnode_id = "beta"\nmax_anchor = "agent_observed"\n',
        )
    assert refused.value.setting == "federation.max_anchor.beta"


def test_seeds_without_a_federation_listen_address_are_refused(tmp_path: Path) -> None:
    """Seeds need this node's own federation port and certificate."""
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, '[federation]\nseeds = ["a:1"]\n')
    assert refused.value.setting.startswith("federation.")
