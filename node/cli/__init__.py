"""The `factnode` command line: run a node, and talk to one through the typed client.

`_parser` holds the grammar (one function per verb), `_commands` the verbs that call a
node, `_local` those that run here (`serve`, `certs`, `demo`, `mcp`, a stdio server with
its own client, and `console`, a web server with its own client), `_output` the text and JSON
printing, `_exits` the exit codes. Every verb goes through the one table `VERBS`: adding
a verb is a parser function and an entry there. May import any factnode package.

Exit codes (for scripts): 0 success, 1 internal error, 2 usage or configuration error,
3 node unreachable, 4 refused (authentication or permission), 5 not found, 6 invalid
argument (the node named the bad fields), 7 a submitted fact was REJECTED, 8 the key is
not in the state the command needs (FAILED_PRECONDITION: `review resolve` on a key not
under review, `import` into a node that is not empty or decides by another policy), 9 `sync` failed with at least one peer. With `--json` a failure prints an
error object on stdout (`_json.error_json`) and exits with the same code.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple, NoReturn

from factnode.client import Client, ClientError

from . import _commands as commands
from . import _local as local
from . import _parser as grammar
from ._exits import (
    EXIT_ERROR,
    EXIT_USAGE,
    Failure,
    UsageError,
    check_address,
    failed_call,
    report,
)
from ._output import as_json

Run = Callable[[argparse.Namespace], int]


class Verb(NamedTuple):
    """One subcommand: how it parses, and what runs it (returning the exit code)."""

    add: grammar.AddVerb
    run: Run


def on_node(command: Callable[[Client, argparse.Namespace], commands.Reply]) -> Run:
    """Runs a verb that talks to a node: connects, prints the reply, maps failures to exits."""

    def run(args: argparse.Namespace) -> int:
        try:
            check_address(args.address)
            node = Client(
                args.address, token=args.token, ca_cert=args.ca_cert or None,
                timeout=args.timeout, retries=0,
            )  # fmt: skip
        except UsageError as exc:
            report(Failure("USAGE", str(exc), EXIT_USAGE, named=False), json=args.json)
        except OSError as exc:  # e.g. an unreadable --ca-cert
            report(Failure("USAGE", str(exc), EXIT_USAGE, named=False), json=args.json)
        try:
            reply = command(node, args)
        except UsageError as exc:
            report(Failure("USAGE", str(exc), EXIT_USAGE, named=False), json=args.json)
        except ClientError as err:
            report(failed_call(err, args.address, args.command), json=args.json)
        except OSError as exc:
            report(Failure("USAGE", str(exc), EXIT_USAGE, named=False), json=args.json)
        finally:
            node.close()
        print(as_json(reply.response) if args.json else reply.text)
        return reply.exit_code

    return run


VERBS: dict[str, Verb] = {
    "serve": Verb(grammar.serve, local.serve),
    "certs": Verb(grammar.certs, local.certs),
    "demo": Verb(grammar.demo, local.demo),
    "submit": Verb(grammar.submit, on_node(commands.submit)),
    "get": Verb(grammar.get, on_node(commands.get)),
    "explain": Verb(grammar.explain, on_node(commands.explain)),
    "history": Verb(grammar.history, on_node(commands.history)),
    "search": Verb(grammar.search, on_node(commands.search)),
    "retract": Verb(grammar.retract, on_node(commands.retract)),
    "decisions": Verb(grammar.decisions, on_node(commands.decisions)),
    "review": Verb(grammar.review, on_node(commands.review)),
    "erase": Verb(grammar.erase, on_node(commands.erase)),
    "erasures": Verb(grammar.erasures, on_node(commands.erasures)),
    "decay": Verb(grammar.decay, on_node(commands.decay)),
    "status": Verb(grammar.status, on_node(commands.status)),
    "sync": Verb(grammar.sync, on_node(commands.sync)),
    "members": Verb(grammar.members, on_node(commands.members)),
    "revoke": Verb(grammar.revoke, on_node(commands.revoke)),
    "export": Verb(grammar.export, on_node(commands.export)),
    "import": Verb(grammar.import_, on_node(commands.import_)),
    "backup": Verb(grammar.backup, on_node(commands.backup)),
    "mcp": Verb(grammar.mcp, local.mcp),
    "health": Verb(grammar.health, local.health),
    "console": Verb(grammar.console, local.console),
}


def build_parser() -> argparse.ArgumentParser:
    """The `factnode` parser, one subcommand per entry of VERBS."""
    return grammar.build_parser(v.add for v in VERBS.values())


def main(argv: Sequence[str] | None = None) -> int:
    """`factnode ...`: parses the arguments and runs the verb; returns the exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(words)
        if args.command == "certs" and not any(a.startswith("-") for a in extra):
            # `factnode certs revoke --out DIR beta`: node ids may follow the options, which
            # argparse does not take for a positional list it has already started.
            args.node_ids += extra
        elif "--json" in extra and args.command in grammar.NO_JSON:
            parser.error(
                f"factnode {args.command} takes no --json: {grammar.NO_JSON[args.command]}"
            )
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except grammar.CommandLineError as exc:
        refused(exc, json="--json" in words)
    args.words = words  # as typed: a verb that starts afresh (`console`) passes them on
    try:
        return VERBS[args.command].run(args)
    except BrokenPipeError:
        # Whoever read the output left (`factnode history ... | head`): no traceback. Python
        # flushes stdout again at exit, so point it at /dev/null for that to succeed quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR


def refused(exc: grammar.CommandLineError, *, json: bool) -> NoReturn:
    """A command line argparse refused: its usage and error on stderr, as argparse prints
    them; with --json the USAGE error object on stdout instead, naming each argument as
    typed. Exits 2 either way."""
    if json:
        report(Failure("USAGE", exc.message, EXIT_USAGE, usage_violations(exc.message), False),
               json=True)  # fmt: skip
    exc.parser.print_usage(sys.stderr)
    print(f"{exc.parser.prog}: error: {exc.message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def usage_violations(message: str) -> tuple[tuple[str, str], ...]:
    """The arguments an argparse message names, each with what is wrong with it."""
    named = re.fullmatch(r"argument (\S+): (.*)", message, re.DOTALL)
    if named:
        return ((named.group(1).split("/")[0], named.group(2)),)
    for head, sep, why in _LISTING:
        if message.startswith(head):
            names = message.removeprefix(head).split(sep)
            # `--anchor/--attribution`: an option by its first name.
            return tuple((n.split("/")[0], why) for n in names if n)
    return ()


# argparse's messages that list arguments: (their start, the separator, what is wrong).
_LISTING = (
    ("the following arguments are required: ", ", ", "is required"),
    ("unrecognized arguments: ", " ", "is not an argument of this command"),
)


__all__ = ["VERBS", "UsageError", "Verb", "build_parser", "main"]
