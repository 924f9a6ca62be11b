"""The CLI's printing: control characters escaped in every text printer, the `--json` format
and its published schemas, the exit-code list in --help, and address checking."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from factnode.api.v1 import factnode_pb2 as pb
from factnode.cli import VERBS, build_parser, main
from factnode.cli import _output as out
from factnode.cli._exits import EXIT_CODES, UsageError, check_address
from factnode.cli._json import OUTPUTS, schema_text, schemas, to_json
from factnode.cli._parser import NO_JSON

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "ana\x1b[2J\n999  2026-01-01  x / y / z  RESOLVED\u202e\x9b"
KEY = pb.Key(namespace="team:x", subject=HOSTILE, predicate="lives\nin")


def _no_controls(text: str) -> None:
    """No character that a terminal acts on, other than the printer's own newlines."""
    bad = [c for c in text if c != "\n" and not c.isprintable()]
    assert not bad, bad


def _evidence() -> pb.Evidence:
    return pb.Evidence(
        evidence_id="e" * 32, key=KEY, object=HOSTILE, version_id="v" * 32,
        anchor="user_stated", source=HOSTILE, origin_node=HOSTILE,
    )  # fmt: skip


def _printed() -> dict[str, str]:
    """Every text printer, fed a key and values full of control characters."""
    belief = pb.Belief(key=KEY, object=HOSTILE, version_id="v" * 32, rule="recency",
                       state=pb.BELIEF_STATE_BELIEVED, evidence=_evidence())  # fmt: skip
    decision = pb.Decision(key=KEY, outcome=pb.OUTCOME_ACCEPTED, rule=HOSTILE, seq=1,
                           detail=HOSTILE, evidence_id="e" * 32)  # fmt: skip
    tally = pb.VersionTally(version_id="v" * 32, object=HOSTILE, weight=3, share_milli=625,
                            voters=[HOSTILE], local_belief=True, local_rule="recency")  # fmt: skip
    queued = pb.ContestedKey(key=KEY, state=pb.BELIEF_STATE_CONTESTED, detail=HOSTILE,
                             served_version_id="v" * 32, versions=[tally])  # fmt: skip
    history = pb.GetHistoryResponse(
        key=KEY,
        versions=[pb.VersionHistory(version_id="v" * 32, object=HOSTILE,
                                    evidence=[_evidence()], ended_by=[_evidence()])],
    )  # fmt: skip
    return {
        "get": out.belief(belief),
        "decisions": out.decisions(pb.ListDecisionsResponse(decisions=[decision])),
        "review list": out.review_queue(pb.ListContestedResponse(keys=[queued])),
        "review show": out.contested_detail(queued, history),
        "history": out.history(history),
        "submit": out.submitted(pb.SubmitFactResponse(decision=decision, belief=belief)),
        "explain": out.explanation(
            pb.ExplainResponse(
                belief=belief,
                comparisons=[pb.Comparison(object=HOSTILE, rule="recency", reason=HOSTILE)],
            )
        ),
        "resolve": out.resolved(pb.ResolveContestedResponse(decision=decision, note=HOSTILE)),
        "status": out.status(
            pb.GetStatusResponse(
                node_id=HOSTILE,
                peers=[pb.PeerStatus(node_id=HOSTILE, address="a:1", last_error=HOSTILE)],
            )
        ),
        "sync": out.synced(
            pb.SyncNowResponse(results=[pb.PeerSyncResult(node_id=HOSTILE, error=HOSTILE)])
        ),
    }


@pytest.mark.parametrize("command", list(_printed()))
def test_every_text_printer_escapes_control_characters(command: str) -> None:
    """A key or value holding ESC sequences, a newline (a forged "RESOLVED" row), a
    bidi override or a C1 CSI prints as visible escapes and forges no line."""
    text = _printed()[command]
    _no_controls(text)
    assert "\\x1b[2J" in text
    assert "\\n999" in text
    assert not any(line.startswith("999") for line in text.splitlines()), text


def test_decisions_rows_stay_one_line_each() -> None:
    """The decision table with a hostile key has its header, rule and one row: three lines."""
    text = _printed()["decisions"]
    assert len(text.splitlines()) == 3, text


def test_safe_keeps_printable_text_as_it_is() -> None:
    """Accents, CJK and spaces are printable: unchanged; only unprintables are escaped."""
    assert out.safe("Lisboa São Tomé 東京 a b") == "Lisboa São Tomé 東京 a b"
    assert out.safe("a\tb\x00c\u2028") == "a\\tb\\x00c\\u2028"


def test_json_has_every_field_integers_as_numbers_and_text_enum_names() -> None:
    """to_json: unset fields are present (null, [], 0, ""), seq is an int, enums as printed."""
    doc = to_json(
        pb.ListDecisionsResponse(decisions=[pb.Decision(seq=7, outcome=pb.OUTCOME_RESOLVED)])
    )
    [d] = doc["decisions"]
    assert d["seq"] == 7 and d["outcome"] == "RESOLVED"
    assert d["key"] is None and d["decided_at"] is None and d["detail"] == ""
    assert doc["next_page_token"] == ""
    status = to_json(pb.GetStatusResponse(counts=pb.StatusCounts()))
    assert status["counts"]["evidence"] == 0 and status["peers"] == []


@pytest.mark.parametrize("name", sorted(schemas()))
def test_the_published_schemas_are_the_ones_the_code_makes(name: str) -> None:
    """docs/cli-json/ holds exactly what `python -m factnode.cli._schemas` writes (rerun it
    after changing a response message)."""
    published = REPO / "docs" / "cli-json" / name
    assert published.read_text(encoding="utf-8") == schema_text(schemas()[name]), (
        f"{published} is stale: run python -m factnode.cli._schemas"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(published.read_text()))


def test_the_schemas_refuse_the_old_format() -> None:
    """The proto3 JSON mapping's output (seq as a string, prefixed enums, zero fields left
    out) does not pass the decisions schema: the schema pins the new format."""
    schema = schemas()["decisions.schema.json"]
    old = {"decisions": [{"seq": "1", "outcome": "OUTCOME_ACCEPTED"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(old, schema)
    new = to_json(
        pb.ListDecisionsResponse(decisions=[pb.Decision(seq=1, outcome=pb.OUTCOME_ACCEPTED)])
    )
    jsonschema.validate(new, schema)


def test_every_command_that_prints_a_response_has_a_schema() -> None:
    """Each node-talking verb's output is in OUTPUTS (review by subcommand), and `health`'s;
    every other verb is either `certs` (its own JSON of paths) or says why it takes none."""
    talking = {"submit", "get", "explain", "history", "search", "retract", "decisions", "erase",
               "erasures", "erasures-show",
               "decay", "status", "sync", "members", "revoke", "export", "import",
               "backup", "health"}  # fmt: skip
    review = {"review-list", "review-show", "review-resolve"}
    assert set(OUTPUTS) == talking | review
    assert set(VERBS) == (talking - {"erasures-show"}) | {"review", "certs"} | set(NO_JSON)


def test_help_lists_every_exit_code() -> None:
    """`factnode --help` names each exit code, 7, 8 and 9 included."""
    text = build_parser().format_help()
    assert EXIT_CODES.split(" ok")[0] == "0"
    for code in range(10):
        assert f"{code} " in text.split("Exit codes:")[1]
    assert "9 sync failed" in " ".join(text.split())


@pytest.mark.parametrize(
    "address", ["127.0.0.1:7420", "localhost:1", "[::1]:7420", "unix:/tmp/f.sock",
                "dns:///node.example:7420", "node-a.internal:65535"],
)  # fmt: skip
def test_well_formed_addresses_are_accepted(address: str) -> None:
    """HOST:PORT, [IPv6]:PORT and gRPC targets with a scheme pass."""
    check_address(address)


@pytest.mark.parametrize(
    "address", ["notanaddress", "127.0.0.1", "host:0", "host:70000", "host:port", "", "a b:1"]
)
def test_a_malformed_address_is_a_usage_error_naming_it(address: str) -> None:
    """No port, a port out of range or not a number, spaces: refused, naming the address."""
    with pytest.raises(UsageError, match="is not a valid address") as err:
        check_address(address)
    assert repr(address) in str(err.value)


@pytest.mark.parametrize("verb", ["mcp", "console"])
def test_servers_take_no_json_flag(verb: str) -> None:
    """`factnode mcp --json` (stdout carries the protocol) and `console --json` (it prints
    no response) are usage errors rather than flags that do nothing."""
    with pytest.raises(SystemExit) as exited:
        main([verb, "--json"])
    assert exited.value.code == 2
