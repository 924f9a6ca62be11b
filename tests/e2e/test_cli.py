"""The `factnode` CLI as a user runs it: a subprocess talking to a real node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _e2e import (
    RPC_TIMEOUT,
    Cli,
    ServerProcess,
    factnode_command,
    free_port,
    isolated_env,
    unique_ns,
)

EXIT_USAGE, EXIT_UNREACHABLE, EXIT_NOT_FOUND, EXIT_INVALID, EXIT_REJECTED = 2, 3, 5, 6, 7
ANA = ("ana", "lives_in")
BOB = ("bob", "role")


def how(
    anchor: str = "user_stated",
    source: str | None = "ana",
    at: str | None = None,
    worth: str | None = None,
    confidence: str | None = None,
) -> list[str]:
    """The provenance options of `factnode submit`."""
    out = ["--anchor", anchor]
    for option, value in (
        ("--source", source),
        ("--valid-from", at),
        ("--worth", worth),
        ("--confidence", confidence),
    ):
        if value is not None:
            out += [option, value]
    return out


def submit(
    cli: Cli, ns: str, value: str, *opts: str, key: tuple[str, str] = ANA, check: int = 0
) -> Any:
    """`factnode submit --json` of `value` for (ns, *key), parsed."""
    r = cli.run("submit", ns, *key, value, *opts, "--json", check=check)
    return json.loads(r.stdout)


def decided(response: Any) -> tuple[str, str]:
    """(outcome, rule) of a submit or resolve response."""
    return response["decision"]["outcome"], response["decision"]["rule"]


def test_submit_prints_outcome_and_rule(cli: Cli) -> None:
    """A first submission prints `ACCEPTED by rule first_version` and the belief it made."""
    ns = unique_ns("user")
    r = cli.run("submit", ns, *ANA, "Porto", *how())
    assert r.stdout.splitlines()[0] == "ACCEPTED by rule first_version", r.describe()
    assert "value:   'Porto'" in r.stdout
    assert "state:   BELIEVED" in r.stdout


def test_trust_anchor_conflict_disbelieves_later_llm_value(cli: Cli) -> None:
    """A later llm_generated value loses to user_stated by trust_anchor: DISBELIEVED."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    r = cli.run("submit", ns, *ANA, "Lisbon", *how("llm_generated", "gpt", at="2025-06-01"))
    assert r.stdout.splitlines()[0] == "DISBELIEVED by rule trust_anchor", r.describe()
    belief = cli.json("get", ns, *ANA)
    assert (belief["object"], belief["rule"]) == ("Porto", "trust_anchor")
    [cmp] = cli.json("explain", ns, *ANA)["comparisons"]
    assert (cmp["object"], cmp["rule"]) == ("Lisbon", "trust_anchor")


def test_recency_conflict_supersedes_and_as_of_answers_the_older_value(cli: Cli) -> None:
    """A later event time supersedes by recency; `get --as-of` answers the older value then."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    out = submit(cli, ns, "Braga", *how(at="2025-01-01T00:00Z"))
    assert decided(out) == ("SUPERSEDED", "recency")
    assert out["belief"]["object"] == "Braga"

    now = cli.run("get", ns, *ANA)
    assert "value:   'Braga'" in now.stdout and "rule:    recency" in now.stdout, now.describe()
    then = cli.run("get", ns, *ANA, "--as-of", "2024-06-01")
    assert "value:   'Porto'" in then.stdout, then.describe()
    assert cli.json("get", ns, *ANA, "--as-of", "2024-06-01")["object"] == "Porto"
    before = cli.run("get", ns, *ANA, "--as-of", "2023-01-01", check=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in before.stderr


def test_history_lists_each_version_with_its_interval(cli: Cli) -> None:
    """`history` shows the superseded value closed at the cutover and the winner open-ended."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    submit(cli, ns, "Braga", *how(at="2025-01-01"))
    lines = cli.run("history", ns, *ANA).stdout.splitlines()
    porto = next(line for line in lines if "'Porto'" in line)
    braga = next(line for line in lines if "'Braga'" in line)
    assert "HISTORICAL" in porto and "2024-01-01T00:00:00Z .. 2025-01-01T00:00:00Z" in porto
    assert "BELIEVED" in braga and "2025-01-01T00:00:00Z .. now" in braga
    versions = {v["object"]: v for v in cli.json("history", ns, *ANA)["versions"]}
    assert versions["Porto"]["status"] == "HISTORICAL"
    assert versions["Braga"]["status"] == "BELIEVED"


def test_explain_names_the_deciding_rule(cli: Cli) -> None:
    """`explain` says what is believed and by which rule it beats each other version."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    submit(cli, ns, "Braga", *how(at="2025-01-01"))
    submit(cli, ns, "Faro", *how("agent_inferred", "bot", at="2026-01-01"))
    text = cli.run("explain", ns, *ANA).stdout
    assert text.splitlines()[0] == "believes 'Braga' (BELIEVED, rule recency)", text
    assert "beats 'Porto' by recency" in text
    assert "beats 'Faro' by trust_anchor" in text


def test_decisions_log_records_every_outcome_with_its_rule(cli: Cli) -> None:
    """`decisions --key` lists one decision per submission, rejections included, in order."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    submit(cli, ns, "Lisbon", *how("llm_generated", "gpt"))
    submit(cli, ns, "Faro", *how(confidence="0.1"), check=EXIT_REJECTED)
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    got = cli.json("decisions", "--key", ns, *ANA)["decisions"]
    assert [(d["outcome"], d["rule"]) for d in got[:3]] == [
        ("ACCEPTED", "first_version"),
        ("DISBELIEVED", "trust_anchor"),
        ("REJECTED", "min_confidence"),
    ]
    assert [d["outcome"] for d in got[3:]] == ["DUPLICATE"]
    seqs = [int(d["seq"]) for d in got]
    assert seqs == sorted(seqs)
    text = cli.run("decisions", "--namespace", ns).stdout
    assert text.count(ns) == 4, text
    assert "REJECTED" in text and "min_confidence" in text


def test_rejected_submit_exits_7(cli: Cli) -> None:
    """A submission decided REJECTED (no source) still prints its decision but exits 7."""
    r = cli.run("submit", unique_ns("user"), *ANA, "Porto", "--anchor", "user_stated", check=7)
    assert r.stdout.startswith("REJECTED by rule no_provenance"), r.describe()


def test_review_list_show_resolve_an_ambiguous_key(cli: Cli) -> None:
    """Two user_stated values tied on every rule are AMBIGUOUS, queued, shown and resolvable."""
    ns = unique_ns("team")
    tie = {"at": "2024-03-01", "worth": "0.6", "confidence": "0.7"}
    submit(cli, ns, "dev", *how(source="alice", **tie), key=BOB)
    second = submit(cli, ns, "ops", *how(source="carol", **tie), key=BOB)
    assert decided(second) == ("AMBIGUOUS", "tiebreak")
    provisional = second["belief"]["object"]
    other = ({"dev", "ops"} - {provisional}).pop()

    [listed] = cli.json("review", "list", "--namespace", ns)["keys"]
    assert (listed["key"]["subject"], listed["state"]) == ("bob", "AMBIGUOUS")
    assert f"{ns} / bob / role: AMBIGUOUS" in cli.run("review", "list", "--namespace", ns).stdout

    shown = cli.json("review", "show", ns, *BOB)
    assert {v["object"] for v in shown["versions"]} == {"dev", "ops"}
    assert [v["object"] for v in shown["versions"] if v.get("local_belief")] == [provisional]
    assert f" * '{provisional}'" in cli.run("review", "show", ns, *BOB).stdout

    resolved = cli.json(
        "review", "resolve", ns, *BOB, "--value", other, "--reason", "asked", "--operator", "olga"
    )
    assert resolved["decision"]["rule"] == "operator_resolution" and resolved["note"], resolved
    # The resolution is a pin in the decision log, with the operator and the reason.
    assert cli.json("get", ns, *BOB)["object"] == other
    logged = cli.json("decisions", "--key", ns, *BOB)["decisions"]
    assert len(logged) == 3
    assert logged[-1]["outcome"] == "RESOLVED" and "olga" in logged[-1]["detail"]


def test_resolve_prints_outcome_rule_and_note_and_settles_the_key(cli: Cli) -> None:
    """Resolving a tie of weaker anchors prints outcome, rule and note, and empties the queue."""
    ns = unique_ns("team")
    submit(cli, ns, "dev", *how("agent_observed", "alice", at="2024-03-01"), key=BOB)
    second = submit(cli, ns, "ops", *how("agent_observed", "carol", at="2024-03-01"), key=BOB)
    other = ({"dev", "ops"} - {second["belief"]["object"]}).pop()
    r = cli.run("review", "resolve", ns, *BOB, "--value", other, "--reason", "asked bob")
    first, note = r.stdout.splitlines()[:2]
    assert first == "RESOLVED by rule operator_resolution", r.describe()
    assert f"'{other}'" in note
    assert cli.json("get", ns, *BOB)["object"] == other
    assert cli.json("review", "list", "--namespace", ns).get("keys", []) == []
    assert "the review queue is empty" in cli.run("review", "list", "--namespace", ns).stdout


def test_resolving_a_user_stated_tie_is_honest_about_the_outcome(cli: Cli) -> None:
    """After `review resolve` the key left the queue, or the note says it is still under review."""
    ns = unique_ns("team")
    submit(cli, ns, "dev", *how(source="alice", at="2024-03-01"), key=BOB)
    second = submit(cli, ns, "ops", *how(source="carol", at="2024-03-01"), key=BOB)
    chosen = second["belief"]["object"]
    resolved = cli.json("review", "resolve", ns, *BOB, "--value", chosen, "--reason", "r")
    if cli.json("review", "list", "--namespace", ns).get("keys"):
        note = resolved["note"].lower()
        assert any(w in note for w in ("ambiguous", "under review", "still")), resolved
    else:
        assert cli.json("get", ns, *BOB)["state"] == "BELIEVED"


def test_erase_subject_removes_every_fact_about_it(cli: Cli) -> None:
    """`erase --subject` reports what it erased; its keys are then NOT_FOUND, others stay."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how())
    submit(cli, ns, "Acme", *how(), key=("ana", "works_at"))
    submit(cli, ns, "Faro", *how(source="rui"), key=("rui", "lives_in"))
    text = cli.run("erase", "--subject", ns, "ana", "--reason", "gdpr request").stdout
    assert text.startswith("erased 2 evidence across 2 key(s); tombstone "), text
    for predicate in ("lives_in", "works_at"):
        r = cli.run("get", ns, "ana", predicate, check=EXIT_NOT_FOUND)
        assert "NOT_FOUND" in r.stderr
    assert cli.json("get", ns, "rui", "lives_in")["object"] == "Faro"
    report = cli.json("erase", "--key", ns, "rui", "lives_in", "--reason", "gdpr request")
    assert report["evidence_erased"] == 1 and report["erasure_id"]


def test_status_reports_node_id_store_and_the_address_clients_use(
    cli: Cli, server: ServerProcess
) -> None:
    """`status` names the node, the store, the counts and the bound address (not port 0)."""
    status = cli.json("status")
    assert status["node_id"] == server.node_id
    assert int(status["counts"]["decisions"]) > 0
    assert status["listen_address"] == server.address
    text = cli.run("status").stdout
    assert text.startswith(f"node {server.node_id} (factnode ")
    assert f"listening on {server.address}" in text
    assert f"store: sqlite:///{server.db_path}" in text
    assert "no peers configured" in text


def test_sync_and_decay_answer_on_a_lone_node(cli: Cli) -> None:
    """`sync` without peers and `decay` both succeed and print a plain answer."""
    assert "no peers to sync with" in cli.run("sync").stdout
    assert cli.json("sync").get("results", []) == []
    assert cli.run("decay").stdout.startswith("decayed ")
    assert isinstance(cli.json("decay"), dict)


def test_invalid_submission_exits_6_naming_every_bad_field(cli: Cli) -> None:
    """Bad input exits 6 naming each bad field on stderr as typed (a positional by its name,
    an option by its flag), with no traceback; nothing is written."""
    ns = unique_ns("user")
    bad = how("gossip", "x", worth="1.5", confidence="-0.1")
    r = cli.run("submit", ns, "", "lives_in", "Porto", *bad, check=EXIT_INVALID)
    for name in ("subject", "--anchor", "--worth", "--confidence"):
        assert f"\n  {name}: " in r.stderr, r.describe()
    assert r.stdout == ""
    assert cli.json("decisions", "--namespace", ns).get("decisions", []) == []


def test_unreachable_node_exits_3_with_a_clear_message(cli: Cli) -> None:
    """A node that is not there: exit 3, a message naming the address on stderr and nothing
    on stdout; with --json the same message in an error object on stdout, nothing on stderr."""
    address = f"127.0.0.1:{free_port()}"
    r = cli.run("get", "user:x", *ANA, "--timeout", "3", address=address, check=EXIT_UNREACHABLE)
    assert f"cannot reach a factnode at {address}" in r.stderr, r.describe()
    assert r.stdout == ""
    r = cli.run("status", "--json", "--timeout", "3", address=address, check=EXIT_UNREACHABLE)
    error = json.loads(r.stdout)["error"]
    assert f"cannot reach a factnode at {address}" in error["message"], r.describe()
    assert error["exit_code"] == EXIT_UNREACHABLE and r.stderr == ""


@pytest.mark.parametrize("command", [["get"], ["explain"], ["history"], ["review", "show"]])
def test_not_found_exits_5(cli: Cli, command: list[str]) -> None:
    """A key the node knows nothing about exits 5 with NOT_FOUND on stderr."""
    r = cli.run(*command, unique_ns("user"), *ANA, check=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in r.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["get", "user:x", *ANA, "--as-of", "yesterday"],
        ["get", "user:x", *ANA, "--as-of", "2024-13-01"],
        ["get", "user:x", *ANA, "--as-of", "9999-12-31T23:00-05:00"],
        ["explain", "user:x", *ANA, "--known-at", "0001-01-01T00:00+01:00"],
        ["submit", "user:x", *ANA, "Porto", "--anchor", "user_stated", "--worth", "much"],
        ["submit", "user:x", *ANA, "Porto", *how(at="9999-12-31T20:00-08:00")],
        ["submit", "user:x", *ANA, "Porto"],
        ["submit", "user:x", *ANA, "Porto", *how(), "--contradicts", "a/b"],
        ["decisions", "--limit", "ten"],
        ["erase", "--reason", "no scope"],
        ["review", "resolve", "user:x", *ANA, "--reason", "neither version nor value"],
        ["status", "--timeout", "0"],
        ["status", "--timeout", "-1"],
        ["status", "--ca-cert", "/nonexistent/ca.pem"],
        ["frobnicate"],
    ],
    ids=[
        "as-of-words",
        "as-of-month-13",
        "as-of-after-9999",
        "known-at-before-0001",
        "worth-not-a-number",
        "valid-from-after-9999",
        "no-anchor",
        "contradicts-not-a-key",
        "limit-not-a-number",
        "erase-without-scope",
        "resolve-without-choice",
        "timeout-zero",
        "timeout-negative",
        "missing-ca-cert",
        "unknown-command",
    ],
)
def test_bad_options_exit_2_without_traceback(cli: Cli, args: list[str]) -> None:
    """A wrong option, time or command exits 2 with a message on stderr, never a traceback."""
    r = cli.run(*args, check=EXIT_USAGE)
    assert r.stderr.strip(), r.describe()
    assert r.stdout == ""


@pytest.mark.parametrize(
    "config",
    [None, "listen = \n", 'listen = "nowhere"\n', "frobs = 1\n"],
    ids=["missing-file", "bad-toml", "bad-listen", "unknown-setting"],
)
def test_serve_with_a_bad_config_exits_2(cli: Cli, tmp_path: Path, config: str | None) -> None:
    """`serve` with a missing or invalid config exits 2 naming the setting, never a traceback."""
    path = tmp_path / "factnode.toml"
    if config is not None:
        path.write_text(config)
    data = str(tmp_path / "data")
    r = cli.run("serve", "--config", str(path), "--data-dir", data, with_address=False, check=None)
    assert r.code == EXIT_USAGE, r.describe()
    assert "setting '" in r.stderr, r.describe()


def test_retract_names_its_anchor_and_an_outranked_one_is_disbelieved(cli: Cli) -> None:
    """`retract --anchor llm_generated` cannot end a user_stated belief (DISBELIEVED by
    trust_anchor, the belief stands); the default anchor, user_stated and later, ends it."""
    ns = unique_ns("user")
    submit(cli, ns, "Porto", *how(at="2024-01-01"))
    weak = cli.run("retract", ns, *ANA, "--anchor", "llm_generated", "--source", "gpt")
    assert weak.stdout.splitlines()[0] == "DISBELIEVED by rule trust_anchor", weak.describe()
    assert cli.json("get", ns, *ANA)["object"] == "Porto"
    ended = cli.run("retract", ns, *ANA, "--reason", "moved away", "--confidence", "0.9")
    assert ended.stdout.splitlines()[0] == "RETRACTED by rule retract", ended.describe()
    cli.run("get", ns, *ANA, check=EXIT_NOT_FOUND)
    # History says what ended it: the user_stated retraction, not the outranked one.
    said = [line for line in cli.run("history", ns, *ANA).stdout.splitlines() if "ended by" in line]
    assert len(said) == 1 and said[0].startswith("'Porto' ended by a retraction by user_stated")
    (version,) = cli.json("history", ns, *ANA)["versions"]
    assert [(e["retracts"], e["anchor"]) for e in version["ended_by"]] == [(True, "user_stated")]
    bad = cli.run("retract", ns, *ANA, "--anchor", "rumour", check=EXIT_INVALID)
    assert "\n  --anchor: unknown trust anchor 'rumour'" in bad.stderr


def test_output_into_a_pipe_its_reader_closed_ends_without_a_traceback(
    server: ServerProcess, tmp_path: Path
) -> None:
    """`factnode status | head -0`: the reader is gone before the output; the command exits 1
    with nothing on stderr, not a BrokenPipeError traceback."""
    with subprocess.Popen(
        factnode_command("status", "--address", server.address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=isolated_env(tmp_path / "home"),
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before the command can have started, let alone written
        err = proc.stderr.read()
        assert proc.wait(timeout=RPC_TIMEOUT * 3) == 1, err
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err


def test_explain_after_a_resolution_and_an_erasure_tells_the_whole_story(cli: Cli) -> None:
    """After `review resolve`, `explain` names each loser's rule on the evidence then the pin
    and says the key is not under review; after erasing the winner of another key, the
    erase reply and `explain` say the loser is believed again, never naming the erased value."""
    ns = unique_ns("user")
    submit(cli, ns, "Faro", *how(at="2025-01-01"), key=BOB)
    submit(cli, ns, "Braga", *how(source="bob", at="2025-01-01"), key=BOB)
    submit(cli, ns, "Lisbon", *how("llm_generated", "gpt", at="2025-01-01"), key=BOB)
    provisional = cli.json("get", ns, *BOB)["object"]
    chosen = "Braga" if provisional == "Faro" else "Faro"
    cli.run("review", "resolve", ns, *BOB, "--value", chosen, "--reason", "asked")
    text = cli.run("explain", ns, *BOB).stdout
    assert "beats 'Lisbon' by operator_resolution: it loses on the evidence by trust_anchor" in text
    assert f"beats {provisional!r} by operator_resolution: it ties with {chosen!r}" in text
    assert "not under review: an operator's resolution" in text
    shown = cli.run("history", ns, *BOB).stdout
    assert "served until the resolution at" in shown

    submit(cli, ns, "Milan", *how("agent_observed", "doc", at="2025-01-01"))
    rome = submit(cli, ns, "Rome", *how(at="2025-01-01"))["evidence_id"]
    erased = cli.run("erase", "--evidence", rome, "--reason", "gdpr").stdout
    told = "'Milan' is believed again: the version that outranked it by trust_anchor was erased"
    assert told in erased
    explained = cli.run("explain", ns, *ANA).stdout
    assert told in explained
    as_json = json.dumps(cli.json("explain", ns, *ANA))
    assert "believed_again" in as_json
    for reply in (erased, explained, as_json, cli.run("history", ns, *ANA).stdout):
        assert "Rome" not in reply
