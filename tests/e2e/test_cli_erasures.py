"""`factnode erasures`, `erasures show ID` and `erase --wait` as a user runs them: a
subprocess against a real node, text and `--json` (checked against docs/cli-json/), and the
exit codes of an unknown and a malformed id (issue 45)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from _e2e import Cli, unique_ns

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "cli-json"
EXIT_NOT_FOUND, EXIT_INVALID = 5, 6


def check(name: str, doc: Any) -> Any:
    """Validates `doc` against the published schema `name` (date-time formats checked)."""
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(doc)
    return doc


def erase(cli: Cli) -> str:
    """Submits a fact, erases its subject (waiting for every member), returns the erasure id."""
    ns = unique_ns("user")
    cli.run("submit", ns, "ana", "lives_in", "Porto", "--anchor", "user_stated", "--source", "ana")
    done = cli.run("erase", "--subject", ns, "ana", "--reason", "GDPR request", "--wait",
                   "--timeout", "10", "--json")  # fmt: skip
    doc = json.loads(done.stdout)
    check("erase", doc)
    assert doc["coverage"]["complete"] is True, doc
    return str(doc["erasure_id"])


def test_erasures_lists_each_erasure_with_its_coverage(cli: Cli) -> None:
    """`erasures` prints a table row per erasure with its coverage in words; `--json` matches
    its schema and lists the erasure, complete, confirmed by this node."""
    erasure_id = erase(cli)
    text = cli.run("erasures").stdout
    [row] = [line for line in text.splitlines() if line.startswith(erasure_id)]
    assert "subject" in row and "complete" in row and "confirmed by 1 of 1 members" in row
    doc = check("erasures", json.loads(cli.run("erasures", "--json").stdout))
    [listed] = [e for e in doc["erasures"] if e["erasure_id"] == erasure_id]
    assert listed["complete"] is True and listed["waiting"] == []


def test_erasures_show_gives_every_members_receipt(cli: Cli) -> None:
    """`erasures show ID` names the erasure, its reason and coverage, and this node's receipt
    (one piece of evidence removed); `--json` matches its schema."""
    erasure_id = erase(cli)
    text = cli.run("erasures", "show", erasure_id).stdout
    assert text.startswith(f"erasure {erasure_id} (subject)"), text
    assert "GDPR request" in text and "confirmed by 1 of 1 members" in text
    doc = check(
        "erasures-show", json.loads(cli.run("erasures", "show", erasure_id, "--json").stdout)
    )
    [receipt] = doc["receipts"]
    assert receipt["removed"] == 1 and doc["complete"] is True


def test_erasures_show_of_an_unknown_or_malformed_id_exits_in_words(cli: Cli) -> None:
    """An id the node holds no erasure for exits 5 (NOT_FOUND); a malformed one exits 6
    (INVALID_ARGUMENT); both say so on stderr, without a traceback."""
    unknown = cli.run("erasures", "show", "0" * 32, check=EXIT_NOT_FOUND)
    assert "NOT_FOUND" in unknown.stderr and "Traceback" not in unknown.stderr
    malformed = cli.run("erasures", "show", "not-an-erasure-id", check=EXIT_INVALID)
    assert "INVALID_ARGUMENT" in malformed.stderr and "Traceback" not in malformed.stderr
