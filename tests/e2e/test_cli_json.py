"""`--json` is a stable format: every command's output (and every failure) matches its
published schema under docs/cli-json/, with integers as numbers, every field present and
enum names as the text prints them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from _e2e import Cli, ServerProcess, free_port, unique_ns

from factnode.cli import main

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "cli-json"
ANA = ("ana", "lives_in")
Run = Callable[..., tuple[int, Any]]


def schema(name: str) -> dict[str, Any]:
    """A published schema, checked as a schema first."""
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def check(name: str, doc: Any) -> Any:
    """Validates `doc` against the schema `name` (format checks on: date-time)."""
    jsonschema.Draft202012Validator(
        schema(name), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(doc)
    return doc


@pytest.fixture
def run(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> Run:
    """Runs `factnode ... --json` in this process against the module's node: (exit, parsed)."""

    def go(*args: str, address: str | None = None) -> tuple[int, Any]:
        argv = [*args, "--json", "--address", address or server.address]
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out = capsys.readouterr().out
        return code, json.loads(out)

    return go


def test_every_command_prints_json_its_schema_accepts(run: Run) -> None:
    """submit, get, explain, history, retract, decisions, review list/show/resolve, erase,
    decay, status and sync each print one JSON document matching its schema."""
    ns = unique_ns("user")
    tie = ("--anchor", "user_stated", "--valid-from", "2024-03-01", "--confidence", "0.9")
    ok = {}
    ok["submit"] = run("submit", ns, *ANA, "Porto", *tie, "--source", "ana")
    ok["submit-2"] = run("submit", ns, *ANA, "Faro", *tie, "--source", "bob")
    ok["get"] = run("get", ns, *ANA)
    ok["explain"] = run("explain", ns, *ANA)
    ok["history"] = run("history", ns, *ANA)
    ok["decisions"] = run("decisions", "--namespace", ns)
    ok["review-list"] = run("review", "list", "--namespace", ns)
    ok["review-show"] = run("review", "show", ns, *ANA)
    ok["review-resolve"] = run("review", "resolve", ns, *ANA, "--value", "Faro", "--reason", "r")
    ok["retract"] = run("retract", ns, *ANA, "--reason", "moved", "--confidence", "0.9")
    ok["erase"] = run("erase", "--key", ns, *ANA, "--reason", "request")
    ok["decay"] = run("decay")
    ok["status"] = run("status")
    ok["sync"] = run("sync")
    for name, (code, doc) in ok.items():
        assert code == 0, (name, doc)
        check(name.removesuffix("-2"), doc)
    # Shapes a script relies on, beyond what the schemas say.
    first, second = ok["submit"][1], ok["submit-2"][1]
    assert (first["decision"]["outcome"], second["decision"]["outcome"]) == (
        "ACCEPTED",
        "AMBIGUOUS",
    )
    assert ok["review-list"][1]["keys"][0]["state"] == "AMBIGUOUS"
    shown = ok["review-show"][1]
    assert {v["object"] for v in shown["versions"]} == {"Porto", "Faro"}
    assert {v["object"] for v in shown["history"]["versions"]} == {"Porto", "Faro"}
    assert ok["get"][1]["evidence"]["corrects"] == "" and ok["get"][1]["tallies"] == []


def test_integers_are_numbers_and_zero_counts_are_present(run: Run) -> None:
    """Decision seqs are JSON integers (not "1"), and a count of zero is 0, not left out."""
    ns = unique_ns("user")
    run("submit", ns, *ANA, "Porto", "--anchor", "user_stated", "--source", "ana")
    _, log = run("decisions", "--namespace", ns)
    [decision] = log["decisions"]
    assert isinstance(decision["seq"], int) and decision["seq"] > 0
    _, decay = run("decay")
    assert decay == {"decayed": 0, "tombstoned": 0}
    _, status = run("status")
    counts = status["counts"]
    assert set(counts) >= {"evidence", "keys", "decisions", "contested", "ambiguous", "rejected"}
    assert all(isinstance(n, int) for n in counts.values())
    assert status["peers"] == []


def test_enum_values_are_named_as_the_text_output_names_them(run: Run, cli: Cli) -> None:
    """`get --json` says "BELIEVED", as `get` prints it, not BELIEF_STATE_BELIEVED."""
    ns = unique_ns("user")
    run("submit", ns, *ANA, "Porto", "--anchor", "user_stated", "--source", "ana")
    _, belief = run("get", ns, *ANA)
    assert belief["state"] == "BELIEVED"
    assert f"state:   {belief['state']}" in cli.run("get", ns, *ANA).stdout
    _, history = run("history", ns, *ANA)
    assert history["versions"][0]["status"] == "BELIEVED"


@pytest.mark.parametrize(
    ("args", "address", "status", "exit_code"),
    [
        (["get", "user:nobody", *ANA], None, "NOT_FOUND", 5),
        (["get", "user:x", *ANA, "--as-of", "yesterday"], None, "USAGE", 2),
        (["review", "resolve", "user:x", *ANA, "--reason", "r"], None, "USAGE", 2),
        (["get", "user:x", *ANA], "notanaddress", "USAGE", 2),
    ],
    ids=["not-found", "bad-time", "resolve-without-choice", "bad-address"],
)
def test_a_failure_prints_an_error_object_on_stdout(
    run: Run, args: list[str], address: str | None, status: str, exit_code: int
) -> None:
    """With --json a failed command prints {"error": {status, message, exit_code,
    field_violations}} on stdout and exits with the same code as without --json."""
    code, doc = run(*args, address=address)
    check("error", doc)
    assert code == exit_code == doc["error"]["exit_code"]
    assert doc["error"]["status"] == status and doc["error"]["message"]


def test_an_invalid_request_names_each_bad_field_in_the_error_object(run: Run) -> None:
    """INVALID_ARGUMENT's field violations come as a list of {field, description}."""
    code, doc = run("submit", "user:x", "", "lives_in", "Porto", "--anchor", "gossip",
                    "--source", "x", "--worth", "1.5")  # fmt: skip
    check("error", doc)
    assert code == 6 and doc["error"]["status"] == "INVALID_ARGUMENT"
    fields = {v["field"] for v in doc["error"]["field_violations"]}
    assert {"subject", "--anchor", "--worth"} <= fields


def test_an_unreachable_node_is_an_error_object_too(run: Run) -> None:
    """A node that is not there: exit 3 and an UNAVAILABLE (or DEADLINE_EXCEEDED) object."""
    code, doc = run("status", "--timeout", "2", address=f"127.0.0.1:{free_port()}")
    check("error", doc)
    assert code == 3 and doc["error"]["status"] in ("UNAVAILABLE", "DEADLINE_EXCEEDED")


def test_write_replies_carry_the_seq_the_decision_log_lists(run: Run) -> None:
    """submit, retract and review resolve print the decision's seq, the one `decisions`
    lists for it, increasing from one write to the next."""
    ns = unique_ns("user")
    tie = ("--anchor", "user_stated", "--valid-from", "2024-03-01", "--confidence", "0.9")
    writes = [
        run("submit", ns, *ANA, "Porto", *tie, "--source", "ana"),
        run("submit", ns, *ANA, "Faro", *tie, "--source", "bob"),
        run("review", "resolve", ns, *ANA, "--value", "Faro", "--reason", "asked"),
        run("retract", ns, *ANA, "--reason", "moved", "--confidence", "0.9"),
    ]
    assert [code for code, _ in writes] == [0, 0, 0, 0], writes
    replies = [doc["decision"] for _, doc in writes]
    _, log = run("decisions", "--namespace", ns)
    listed = {d["seq"]: d for d in log["decisions"]}
    seqs = [d["seq"] for d in replies]
    assert seqs == sorted(set(seqs)) and seqs[0] > 0, seqs
    assert [listed.get(s) for s in seqs] == replies


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["decisions", "--limit", "many"], "--limit"),
        (["submit", "user:x", *ANA, "Porto"], "--anchor"),
        (["review", "frobnicate"], "SUBCOMMAND"),
        (["get", "user:x", "ana"], "predicate"),
        (["submit", "user:x", *ANA, "Porto", "--anchor", "user_stated", "--bogus"], "--bogus"),
        (["nosuchcommand"], "COMMAND"),
    ],
    ids=["bad-int", "missing-flag", "bad-subcommand", "missing-positional", "unknown", "verb"],
)
def test_a_bad_command_line_with_json_is_a_usage_error_object(
    run: Run, capsys: pytest.CaptureFixture[str], args: list[str], field: str
) -> None:
    """argparse's refusals, with --json, print the USAGE error object on stdout (exit 2)
    naming the argument as typed, and nothing on stderr."""
    code, doc = run(*args)
    check("error", doc)
    assert code == 2 == doc["error"]["exit_code"] and doc["error"]["status"] == "USAGE", doc
    assert field in [v["field"] for v in doc["error"]["field_violations"]], doc
    assert capsys.readouterr().err == ""


def test_without_json_a_bad_command_line_is_still_argparse_text(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --json a bad command line prints argparse's usage and error on stderr, exit 2."""
    with pytest.raises(SystemExit) as exited:
        main(["decisions", "--limit", "many"])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage: factnode decisions" in err
    assert "argument --limit: invalid int value: 'many'" in err


@pytest.mark.parametrize("verb", ["serve", "demo", "mcp", "console"])
def test_a_command_without_json_says_so_in_the_error_object(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The commands that serve or narrate take no --json; asked for it, they answer with a
    USAGE error object that says why (the README lists them)."""
    with pytest.raises(SystemExit) as exited:
        main([verb, "--json"])
    doc = check("error", json.loads(capsys.readouterr().out))
    assert exited.value.code == 2 and doc["error"]["status"] == "USAGE"
    assert f"factnode {verb} takes no --json" in doc["error"]["message"]
    readme = (SCHEMAS.parents[1] / "README.md").read_text()
    assert f"`{verb}`" in readme.split("take no `--json`")[1].split("\n\n")[0]


def test_health_takes_json(server: ServerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    """`health --json` prints {"status": "SERVING"} (its schema), and an unreachable node is
    the error object with exit 3."""
    assert main(["health", "--json", "--address", server.address]) == 0
    assert check("health", json.loads(capsys.readouterr().out)) == {"status": "SERVING"}
    gone = f"127.0.0.1:{free_port()}"
    assert main(["health", "--json", "--address", gone, "--timeout", "1"]) == 3
    doc = check("error", json.loads(capsys.readouterr().out))
    assert doc["error"]["status"] == "UNAVAILABLE" and doc["error"]["exit_code"] == 3


def test_a_node_refusal_names_the_flag_the_user_typed(run: Run) -> None:
    """A field the node refuses is named as the command line names it: --limit, not
    page_size; --anchor, not attribution; --valid-from, not valid_from."""
    code, doc = run("decisions", "--limit", "-1")
    check("error", doc)
    assert code == 6 and [v["field"] for v in doc["error"]["field_violations"]] == ["--limit"]
    code, doc = run("submit", "user:x", *ANA, "Porto", "--anchor", "gossip", "--source", "x")
    assert code == 6 and [v["field"] for v in doc["error"]["field_violations"]] == ["--anchor"]


def test_attribution_is_accepted_as_the_former_name_of_anchor(run: Run) -> None:
    """`--attribution` is an alias of `--anchor`; the reply names the field `anchor`."""
    ns = unique_ns("user")
    code, doc = run("submit", ns, *ANA, "Porto", "--attribution", "user_stated", "--source", "a")
    assert code == 0 and doc["belief"]["evidence"]["anchor"] == "user_stated", doc
    assert "attribution" not in doc["belief"]["evidence"]
