"""The CLI's exit codes 8 and 9, its review views in text, its escaping of hostile keys and
its refusal of a malformed address, as a user runs it (subprocesses, a real node)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from _e2e import Cli, ServerProcess, free_port, isolated_env, start_server, unique_ns

EXIT_USAGE, EXIT_PRECONDITION, EXIT_SYNC_FAILED = 2, 8, 9
TIE = ("--anchor", "user_stated", "--valid-from", "2024-03-01", "--confidence", "0.9")


def _tie(cli: Cli, ns: str, subject: str, predicate: str = "lives_in") -> None:
    """Two user_stated values no rule separates: the key is AMBIGUOUS, in the queue."""
    cli.run("submit", ns, subject, predicate, "Porto", *TIE, "--source", "ana")
    cli.run("submit", ns, subject, predicate, "Faro", *TIE, "--source", "bob")


def test_resolving_a_settled_key_exits_8_naming_its_state_and_writes_nothing(cli: Cli) -> None:
    """`review resolve` on a key the rules decide exits 8 with FAILED_PRECONDITION naming the
    state and rule; the decision log and the belief are unchanged (text and --json)."""
    ns = unique_ns("user")
    cli.run("submit", ns, "ana", "lives_in", "blue", "--anchor", "user_stated", "--source", "a")
    cli.run("submit", ns, "ana", "lives_in", "red", "--anchor", "llm_generated", "--source", "b")
    before = cli.json("decisions", "--namespace", ns)
    for value in ("blue", "red"):
        r = cli.run("review", "resolve", ns, "ana", "lives_in", "--value", value,
                    "--reason", "checked", check=EXIT_PRECONDITION)  # fmt: skip
        assert "FAILED_PRECONDITION" in r.stderr and "not under review" in r.stderr, r.describe()
        assert "BELIEVED by rule" in r.stderr and r.stdout == ""
    r = cli.run("review", "resolve", ns, "ana", "lives_in", "--value", "red", "--reason", "x",
                "--json", check=EXIT_PRECONDITION)  # fmt: skip
    error = json.loads(r.stdout)["error"]
    assert (error["status"], error["exit_code"]) == ("FAILED_PRECONDITION", EXIT_PRECONDITION)
    assert cli.json("decisions", "--namespace", ns) == before
    assert cli.json("get", ns, "ana", "lives_in")["object"] == "blue"


def test_review_list_prints_the_reason_shares_and_voters_and_show_the_evidence(cli: Cli) -> None:
    """`review list` gives each key's reason and each version's share, voters and rule;
    `review show` adds every version's full id, weight and evidence (anchor, source)."""
    ns = unique_ns("team")
    _tie(cli, ns, "bob")
    listed = cli.run("review", "list", "--namespace", ns).stdout
    assert f"{ns} / bob / lives_in: AMBIGUOUS" in listed
    assert "why: no rule discriminates between 'Faro', 'Porto'" in listed
    assert "no votes" in listed and "tiebreak" in listed
    shown = cli.run("review", "show", ns, "bob", "lives_in").stdout
    assert shown != listed
    assert "why: no rule discriminates" in shown and "more than 66%" in shown
    assert "no votes counted" in shown
    assert "user_stated from 'ana'" in shown and "user_stated from 'bob'" in shown
    versions = cli.json("review", "show", ns, "bob", "lives_in")["versions"]
    for v in versions:
        assert f"version {v['version_id']}" in shown


def test_hostile_key_parts_print_escaped_in_decisions_get_and_review_list(cli: Cli) -> None:
    """A key whose subject holds ESC[2J and a newline with a forged row prints as visible
    escapes in decisions, get, review list and review show: no raw control character."""
    ns = unique_ns("team")
    subject = "ops\x1b[2J\n999  2026-01-01T00:00:00Z  x / y / z  RESOLVED"
    _tie(cli, ns, subject, "lead\x1b[31m")
    runs = {
        "decisions": cli.run("decisions", "--namespace", ns),
        "get": cli.run("get", ns, subject, "lead\x1b[31m"),
        "review list": cli.run("review", "list", "--namespace", ns),
        "review show": cli.run("review", "show", ns, subject, "lead\x1b[31m"),
    }
    for name, r in runs.items():
        assert "\x1b" not in r.stdout, (name, r.stdout)
        assert "ops\\x1b[2J\\n999" in r.stdout and "lead\\x1b[31m" in r.stdout, (name, r.stdout)
        assert not any(line.startswith("999") for line in r.stdout.splitlines()), r.stdout


def test_a_malformed_address_is_named_as_invalid_not_as_a_node_that_is_down(cli: Cli) -> None:
    """`--address notanaddress` exits 2 saying the address is not valid, naming it."""
    r = cli.run("status", address="notanaddress", check=EXIT_USAGE)
    assert "'notanaddress' is not a valid address" in r.stderr, r.describe()
    assert "is `factnode serve` running" not in r.stderr


@pytest.fixture(scope="module")
def lonely(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A federated node whose one peer never started: its sync rounds fail."""
    work = tmp_path_factory.mktemp("lonely")
    certs = Cli("", isolated_env(work / "home"))
    certs.run("certs", "--out", str(work / "certs"), "lonely", "gone", with_address=False)
    config = work / "factnode.toml"
    config.write_text(
        f'node_id = "lonely"\n[federation]\nlisten = "127.0.0.1:{free_port()}"\n'
        f'cert = "{work}/certs/lonely.crt"\nkey = "{work}/certs/lonely.key"\n'
        f'ca = "{work}/certs/ca.crt"\nsync_interval_seconds = 3600\n\n'
        f'[[peers]]\naddress = "127.0.0.1:{free_port()}"\nnode_id = "gone"\n'
    )
    server = start_server(work, "--config", str(config))
    try:
        yield server
    finally:
        server.stop()


def test_sync_with_a_failed_peer_exits_9_naming_the_peer_and_why(
    lonely: ServerProcess, tmp_path: Path
) -> None:
    """`factnode sync` whose peer is down prints which peer failed and why, and exits 9;
    with --json the response (ok false, the error) with the same exit code."""
    cli = Cli(lonely.address, isolated_env(tmp_path / "home"))
    r = cli.run("sync", "--timeout", "30", check=EXIT_SYNC_FAILED)
    assert "sync with gone (127.0.0.1:" in r.stdout and ") failed: " in r.stdout, r.describe()
    r = cli.run("sync", "--json", "--timeout", "30", check=EXIT_SYNC_FAILED)
    [result] = json.loads(r.stdout)["results"]
    assert result["node_id"] == "gone" and result["ok"] is False and result["error"]
