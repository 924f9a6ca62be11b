"""The command line's grammar: one function per verb adds its subcommand."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import factnode
from factnode import health as health_probe
from factnode.config import EVENT_LOOPS, SETTINGS

from ._exits import EXIT_CODES

DEFAULT_ADDRESS = "127.0.0.1:7420"
# Adds one verb: (subparsers, the options every node-talking verb shares).
AddVerb = Callable[[Any, argparse.ArgumentParser], None]


def _add_key(p: argparse.ArgumentParser) -> None:
    p.add_argument("namespace", help="scope of the fact, e.g. user:ana")
    p.add_argument("subject", help="what the fact is about, e.g. ana")
    p.add_argument("predicate", help="the property, e.g. lives_in")


def _operator(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--operator", default=os.environ.get("USER", "operator"), help="your name (default $USER)"
    )


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


MAX_SESSION_HOURS = 720.0


def _hours(text: str) -> float:
    """A sign-in's lifetime: more than 0 and at most MAX_SESSION_HOURS (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of hours") from None
    if not 0 < value <= MAX_SESSION_HOURS:
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_SESSION_HOURS:g} hours, got {text!r}"
        )
    return value


def _common(*, json: bool = True) -> argparse.ArgumentParser:
    """Options of every verb that talks to a node (`--json` where it prints a response)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--address",
        default=os.environ.get("FACTNODE_ADDRESS", DEFAULT_ADDRESS),
        help="node to talk to (env FACTNODE_ADDRESS; default %(default)s)",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("FACTNODE_TOKEN"),
        help="bearer token (env FACTNODE_TOKEN)",
    )
    common.add_argument(
        "--ca-cert",
        default=os.environ.get("FACTNODE_CA_CERT"),
        help="CA certificate for a TLS node",
    )
    common.add_argument(
        "--timeout", type=_seconds, default=10.0, help="seconds per call (default %(default)s)"
    )
    if json:
        common.add_argument(
            "--json",
            action="store_true",
            help="print the response (or the error) as JSON on stdout; schemas in docs/cli-json/",
        )
    return common


# The commands that take no `--json`, and why (the README's list says the same).
NO_JSON = {
    "serve": "it runs a node until stopped and logs, it prints no reply",
    "demo": "it is a narrated walkthrough for people",
    "mcp": "its stdout carries the Model Context Protocol's own JSON-RPC messages",
    "console": "it serves web pages until stopped and prints no reply",
}


class CommandLineError(Exception):
    """argparse refused the command line: `message` as argparse words it, from `parser`."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose refusals raise CommandLineError instead of exiting, so that
    `main` can print them as text or, with --json, as the error object."""

    def error(self, message: str) -> NoReturn:
        raise CommandLineError(self, message)


def build_parser(verbs: Iterable[AddVerb]) -> argparse.ArgumentParser:
    """The `factnode` parser with each verb's subcommand, in the order given."""
    parser = Parser(
        prog="factnode",
        description="Deterministic, explainable beliefs for AI agents. "
        "Run a node with `factnode serve`; the other commands talk to one.",
        epilog=f"Exit codes: {EXIT_CODES}. With --json a failure prints an error object on stdout.",
    )
    parser.add_argument("--version", action="version", version=f"factnode {factnode.__version__}")
    common = _common()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in verbs:
        add(sub, common)
    return parser


def serve(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("serve", help="run a node")
    p.add_argument("--config", default=os.environ.get("FACTNODE_CONFIG"), help="TOML settings file")
    p.add_argument(
        "--restore",
        metavar="FILE",
        help="import this export (`factnode export`) into the node's empty store before it "
        "serves or syncs; a federated node then serves no data until its first sync round "
        "(docs/operations/backup.md)",
    )
    p.add_argument(
        "--serve-before-sync",
        action="store_true",
        help="serve a restored federated node's data before its first sync round has completed",
    )
    # One flag per setting, from the settings table: a flag beats its environment variable,
    # which beats the file (docs/operations/configuration-reference.md).
    for setting in SETTINGS:
        p.add_argument(
            setting.flag,
            dest=setting.dest,
            metavar="VALUE",
            choices=EVENT_LOOPS if setting.name == "event_loop" else None,
            help=f"{setting.help} (env {setting.env}; default {setting.default})",
        )


def certs(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "certs",
        help="make a development CA and node certificates for peer mTLS; `certs revoke` revokes",
        usage="factnode certs [--out DIR] [--host HOST] NODE_ID [NODE_ID ...]\n"
        "       factnode certs revoke [--out DIR] [--cert FILE] [NODE_ID ...]",
        description="Issues a certificate per node id, signed by the CA in --out (made there "
        "if missing). `factnode certs revoke NODE_ID...` instead adds those nodes' "
        "certificates (--out/NODE_ID.crt, or --cert FILE) to the CA's signed revocation list "
        "--out/revoked.crl; hand that file to any member with `factnode revoke`.",
    )
    p.add_argument(
        "node_ids",
        nargs="*",
        metavar="NODE_ID",
        help="node ids to issue certificates for (after `revoke`: to revoke)",
    )
    p.add_argument(
        "--cert",
        action="append",
        default=[],
        metavar="FILE",
        help="with `revoke`: a certificate file to revoke (repeatable)",
    )
    p.add_argument(
        "--out",
        default="certs",
        help="directory (default %(default)s); an existing ca.crt/ca.key there is reused",
    )
    p.add_argument(
        "--host",
        action="append",
        default=["localhost", "127.0.0.1"],
        help="extra host name or IP for the certificates",
    )
    p.add_argument("--json", action="store_true", help="print the file paths as JSON")


def demo(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "demo",
        help="start a small local federation and walk through a conflict, a consensus and a contested key",
    )
    p.add_argument("--keep", action="store_true", help="leave the nodes running afterwards")


def submit(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("submit", parents=[common], help="submit a fact and print the decision")
    _add_key(p)
    p.add_argument("value", help="the object of the fact, e.g. Lisbon")
    p.add_argument(
        "--anchor",
        "--attribution",
        dest="anchor",
        required=True,
        help="trust anchor, e.g. user_stated (--attribution: its former name, still accepted)",
    )
    p.add_argument(
        "--source", help="who or what said it; without one the fact is REJECTED (no_provenance)"
    )
    p.add_argument("--worth", type=float, help="worth in [0, 1] (default 0.5)")
    p.add_argument("--confidence", type=float, help="confidence in [0, 1] (default 0.5)")
    p.add_argument("--valid-from", help="event time (ISO 8601); default: now")
    p.add_argument("--corrects", help="evidence id this corrects (it was never true)")
    p.add_argument(
        "--contradicts", help="another key NAMESPACE/SUBJECT/PREDICATE this fact moves from"
    )
    p.add_argument("--idempotency-key", help="resubmissions with this key are DUPLICATE")


def _at_a_time(sub: Any, common: argparse.ArgumentParser, name: str, helptext: str) -> None:
    p = sub.add_parser(name, parents=[common], help=helptext)
    _add_key(p)
    p.add_argument("--as-of", help="event time to answer for (ISO 8601)")
    p.add_argument("--known-at", help="what the node knew at this time (ISO 8601)")


def get(sub: Any, common: argparse.ArgumentParser) -> None:
    _at_a_time(sub, common, "get", "the belief for a key")


def explain(sub: Any, common: argparse.ArgumentParser) -> None:
    _at_a_time(sub, common, "explain", "why the belief beats each other version")


def history(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "history", parents=[common], help="every version of a key and when it was believed"
    )
    _add_key(p)
    p.add_argument("--known-at", help="as the node knew it at this time (ISO 8601)")


def retract(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "retract",
        parents=[common],
        help="record that a belief stopped being true (it ends what it outranks)",
    )
    _add_key(p)
    p.add_argument("--value", help="the value to retract (default: every value of the key)")
    p.add_argument("--at", help="when it stopped being true (ISO 8601; default now)")
    p.add_argument("--reason", help="why")
    p.add_argument(
        "--anchor",
        "--attribution",
        dest="anchor",
        help="trust anchor of the retraction (default user_stated; --attribution: its former "
        "name, still accepted)",
    )
    p.add_argument("--source", help="who or what says so (default: your token's name)")
    p.add_argument("--worth", type=float, help="worth in [0, 1] (default 0.5)")
    p.add_argument("--confidence", type=float, help="confidence in [0, 1] (default 0.5)")


def search(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "search",
        parents=[common],
        help="find what the node believes by asking in words (recall)",
        description="Ranks the beliefs whose key, value or source match any of the words of "
        "QUERY, best first. Only values the node serves (at --as-of / --known-at) are ever "
        "shown: superseded, disbelieved, decayed, retracted and erased ones never are.",
    )
    p.add_argument("query", help='the words to look for, e.g. "where does Ana live"')
    p.add_argument("--namespace", help="only namespaces starting with this prefix")
    p.add_argument("--subject", help="only this subject")
    p.add_argument("--predicate", help="only this predicate")
    p.add_argument(
        "--state",
        action="append",
        choices=["BELIEVED", "AMBIGUOUS", "CONTESTED"],
        help="only beliefs in this state (repeat for several)",
    )
    p.add_argument(
        "--anchor", action="append", help="only values resting on this trust anchor (repeatable)"
    )
    p.add_argument("--as-of", help="search what was believed at this event time (ISO 8601)")
    p.add_argument("--known-at", help="as the node knew it at this time (ISO 8601)")
    p.add_argument(
        "--limit", type=int, default=10, help="hits per page, at most 100 (default %(default)s)"
    )
    p.add_argument("--page-token", help="continue a search")


def decisions(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("decisions", parents=[common], help="the decision log")
    p.add_argument("--namespace", help="only this namespace")
    p.add_argument(
        "--key", nargs=3, metavar=("NAMESPACE", "SUBJECT", "PREDICATE"), help="only this key"
    )
    p.add_argument("--limit", type=int, default=50, help="page size (default %(default)s)")
    p.add_argument("--page-token", help="continue a listing")


def review(sub: Any, common: argparse.ArgumentParser) -> None:
    review = sub.add_parser("review", help="contested and ambiguous keys (operator)")
    rsub = review.add_subparsers(dest="review_command", required=True, metavar="SUBCOMMAND")
    p = rsub.add_parser("list", parents=[common], help="the review queue")
    p.add_argument("--namespace", help="only this namespace")
    p.add_argument("--limit", type=int, default=50, help="page size (default %(default)s)")
    p = rsub.add_parser("show", parents=[common], help="one key under review")
    _add_key(p)
    p = rsub.add_parser("resolve", parents=[common], help="choose a version or give a value")
    _add_key(p)
    p.add_argument("--version", help="version id to believe")
    p.add_argument("--value", help="value to believe")
    p.add_argument("--reason", required=True, help="why (kept in the log)")
    _operator(p)


def erase(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("erase", parents=[common], help="destroy personal data (operator)")
    p.add_argument("--evidence", help="one evidence id")
    p.add_argument(
        "--key", nargs=3, metavar=("NAMESPACE", "SUBJECT", "PREDICATE"), help="every fact of a key"
    )
    p.add_argument(
        "--subject", nargs=2, metavar=("NAMESPACE", "SUBJECT"), help="every fact about a subject"
    )
    p.add_argument("--reason", required=True, help="why (kept in the tombstone)")
    _operator(p)
    p.add_argument(
        "--wait",
        action="store_true",
        help="then wait until every current member has confirmed the erasure by a signed "
        "receipt, for at most --timeout seconds (exit 10 if it passes first, naming the members "
        "still waited for)",
    )


def erasures(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "erasures",
        parents=[common],
        help="the erasures held and which members have confirmed each (operator)",
        description="Lists the erasures this node holds, newest first, with their coverage: "
        "which current members have confirmed each by a signed receipt, and which are still "
        "waited for. `factnode erasures show ID` shows one erasure and every member's receipt.",
    )
    p.add_argument(
        "action", nargs="?", choices=["list", "show"], default="list", help="list (default) or show"
    )
    p.add_argument("erasure_id", nargs="?", help="with show: the erasure's id")
    p.add_argument("--limit", type=int, default=50, help="page size (default %(default)s)")
    p.add_argument("--page-token", help="continue a listing")


def decay(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("decay", parents=[common], help="run the decay job now (operator)")
    p.add_argument("--now", help="evaluate as of this time (ISO 8601)")


def status(sub: Any, common: argparse.ArgumentParser) -> None:
    sub.add_parser("status", parents=[common], help="node id, counts and peers (operator)")


def sync(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("sync", parents=[common], help="run a sync round now (operator)")
    p.add_argument("--peer", help="only this peer node id")


def members(sub: Any, common: argparse.ArgumentParser) -> None:
    sub.add_parser(
        "members",
        parents=[common],
        help="every federation member the node knows: address, last heard, certificate, cap (operator)",
    )


def revoke(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "revoke",
        parents=[common],
        help="hand the node a revocation list signed by the CA (`factnode certs revoke`) (operator)",
    )
    p.add_argument("file", metavar="FILE", help="the revocation list (revoked.crl)")


def export(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "export",
        parents=[common],
        help="write the node's logical backup (evidence, tombstones, pins) to FILE (operator)",
    )
    p.add_argument("file", metavar="FILE", help="the JSON Lines file to write (must not exist)")


def import_(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "import",
        parents=[common],
        help="replay an export into an empty node with the same node id (operator)",
    )
    p.add_argument("file", metavar="FILE", help="a file `factnode export` wrote")
    p.add_argument(
        "--force-policy",
        action="store_true",
        help="import even though the file was exported under another policy (its evidence is "
        "then decided by this node's policy)",
    )


def backup(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "backup",
        parents=[common],
        help="have the node copy its SQLite store while it serves, into `backups` beside the "
        "store (operator)",
    )
    p.add_argument("name", metavar="NAME", help="a new file name for the copy (no directory)")


def mcp(sub: Any, common: argparse.ArgumentParser) -> None:
    # No --json: stdout carries the protocol's own JSON-RPC messages.
    p = sub.add_parser(
        "mcp",
        parents=[_common(json=False)],
        help="serve the Model Context Protocol for an LLM agent (stdio; Streamable HTTP with --http)",
    )
    p.add_argument(
        "--http", action="store_true",
        help="serve Streamable HTTP (at /mcp on --listen) instead of stdio",
    )  # fmt: skip
    p.add_argument(
        "--listen", default=os.environ.get("FACTNODE_MCP_LISTEN", "127.0.0.1:7430"),
        help="with --http: host:port to serve on (env FACTNODE_MCP_LISTEN; default "
        "%(default)s, loopback only; port 0 picks a free one)",
    )  # fmt: skip
    p.add_argument(
        "--mcp-token-file", default=os.environ.get("FACTNODE_MCP_TOKEN_FILE"), metavar="FILE",
        help="with --http: bearer tokens MCP clients must send, one per line (env "
        "FACTNODE_MCP_TOKEN_FILE; FACTNODE_MCP_TOKENS adds comma-separated ones); required "
        "for a non-loopback --listen",
    )  # fmt: skip
    p.add_argument(
        "--allowed-host", action="append", default=[], metavar="HOST[:PORT]",
        help="with --http: another name clients reach the server by, accepted as the Host "
        "header (repeatable; env FACTNODE_MCP_ALLOWED_HOSTS, comma-separated); the listen "
        "address, and localhost on loopback, are accepted already (DNS-rebinding protection)",
    )  # fmt: skip
    p.add_argument(
        "--allowed-origin", action="append", default=[], metavar="ORIGIN",
        help="with --http: a browser origin (scheme://host[:port]) allowed to call the server "
        "(repeatable; env FACTNODE_MCP_ALLOWED_ORIGINS, comma-separated)",
    )  # fmt: skip


def health(sub: Any, common: argparse.ArgumentParser) -> None:
    health_probe.add_command(sub)


def console(sub: Any, common: argparse.ArgumentParser) -> None:
    # No --json: it serves web pages and prints nothing else.
    common = _common(json=False)  # this command's own copy: its --token means less here
    for action in common._actions:
        if "--token" in action.option_strings:
            action.help = (
                "the console's own bearer token (env FACTNODE_TOKEN), used only to follow "
                "WatchBeliefs so open log pages update at once; never to read or act for a "
                "browser: each user signs in with their own token"
            )
    p = sub.add_parser(
        "console", parents=[common], help="serve the operators' web console for a node"
    )
    p.add_argument(
        "--listen",
        default=os.environ.get("FACTNODE_CONSOLE_LISTEN", "127.0.0.1:7480"),
        help="host:port the console serves HTTP on (env FACTNODE_CONSOLE_LISTEN; default "
        "%(default)s, loopback only)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the console answers to besides the --listen host (e.g. localhost, "
        "its DNS name, or behind a proxy); repeatable; FACTNODE_CONSOLE_ALLOW_HOSTS adds "
        "comma-separated ones. No other name is accepted, loopback ones included",
    )
    p.add_argument(
        "--session-hours",
        type=_hours,
        default=os.environ.get("FACTNODE_CONSOLE_SESSION_HOURS", "8"),
        metavar="HOURS",
        help="how long a sign-in lasts (env FACTNODE_CONSOLE_SESSION_HOURS; default "
        "%(default)s). Users sign in with a token the node knows (operator or reader); a "
        "non-loopback --listen refuses to start in front of a node without tokens",
    )
