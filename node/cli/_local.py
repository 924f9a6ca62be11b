"""The verbs that run here rather than call a node: `serve`, `certs`, `demo` and `mcp` (which
talks to a node through its own client)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from grpc_health.v1 import health_pb2

from factnode import health as health_probe
from factnode._grpc_quiet import rerun_quietly

from ._exits import EXIT_OK, EXIT_USAGE
from ._json import error_json
from ._output import as_json


def serve(args: argparse.Namespace) -> int:
    from factnode.config import SETTINGS, ConfigError, load_settings
    from factnode.server._loop import loop_factory
    from factnode.server.app import serve as run_node

    flags = {s.name: getattr(args, s.dest) for s in SETTINGS if getattr(args, s.dest) is not None}
    try:
        settings = load_settings(args.config, os.environ, flags)
        _, new_loop = loop_factory(settings.event_loop)
        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(
                run_node(
                    settings,
                    announce=lambda line: print(line, flush=True),
                    restore=Path(args.restore) if args.restore else None,
                    serve_before_sync=args.serve_before_sync,
                )
            )
    except ConfigError as exc:
        print(f"factnode serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    return EXIT_OK


def certs(args: argparse.Namespace) -> int:
    from factnode.certs import REVOKE_VERB, ensure_ca, issue_node_cert

    out = Path(args.out)
    if args.node_ids[:1] == [REVOKE_VERB]:
        return _revoke_certs(out, args.node_ids[1:], [Path(c) for c in args.cert], args.json)
    if args.cert:
        print("factnode certs: --cert goes with `factnode certs revoke`", file=sys.stderr)
        return EXIT_USAGE
    if not args.node_ids:
        print(
            "factnode certs: name at least one NODE_ID to issue a certificate for", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        ensure_ca(out)
        made = [issue_node_cert(out, node_id, tuple(args.host)) for node_id in args.node_ids]
    except (ValueError, OSError) as exc:
        print(f"factnode certs: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(
            json.dumps(
                {
                    "ca": str(out / "ca.crt"),
                    "nodes": {
                        n: {"cert": str(c), "key": str(k)}
                        for n, (c, k) in zip(args.node_ids, made, strict=True)
                    },
                },
                indent=2,
            )
        )
    else:
        print(f"CA: {out / 'ca.crt'} (key {out / 'ca.key'}: keep it private)")
        for node_id, (crt, key) in zip(args.node_ids, made, strict=True):
            print(f"{node_id}: {crt}, {key}")
    return EXIT_OK


def _revoke_certs(out: Path, node_ids: list[str], cert_files: list[Path], as_json: bool) -> int:
    from factnode.certs import revoke

    try:
        path, number = revoke(out, node_ids, cert_files)
    except (ValueError, OSError) as exc:
        print(f"factnode certs revoke: {exc}", file=sys.stderr)
        return EXIT_USAGE
    revoked = [*node_ids, *map(str, cert_files)]
    if as_json:
        print(json.dumps({"revocation_list": str(path), "number": number, "revoked": revoked}))
    else:
        print(f"revocation list {path} (number {number}) revokes {', '.join(revoked)}")
        print("hand it to any member: factnode revoke " + str(path))
    return EXIT_OK


def health(args: argparse.Namespace) -> int:
    """`factnode health`: the node's serving status, as text or (`--json`) as JSON."""
    if not args.json:
        return health_probe.run(args)
    found = health_probe.probe(args)
    if found.failure:
        print(as_json(error_json(found.status, found.failure, found.exit_code)))
    else:
        status = health_pb2.HealthCheckResponse.ServingStatus.Value(found.status)
        print(as_json(health_pb2.HealthCheckResponse(status=status)))
    return found.exit_code


def demo(args: argparse.Namespace) -> int:
    from factnode.demo import main as run_demo

    run_demo(["--keep"] if args.keep else [])
    return EXIT_OK


def _listed(env: str) -> list[str]:
    """A comma-separated environment variable's items (none when unset)."""
    return [item.strip() for item in os.environ.get(env, "").split(",") if item.strip()]


def mcp(args: argparse.Namespace) -> int:
    """Serves the Model Context Protocol on stdio for an LLM agent, backed by a node."""
    try:
        from factnode import mcp_server
    except ModuleNotFoundError as exc:  # the optional SDK
        print(f"factnode: {exc}; install it with: pip install 'factnode[mcp]'", file=sys.stderr)
        return EXIT_USAGE
    if args.http:
        return mcp_server.main_http(
            args.address, token=args.token, ca_cert=args.ca_cert, timeout=args.timeout,
            listen=args.listen, token_file=args.mcp_token_file,
            tokens_env=os.environ.get("FACTNODE_MCP_TOKENS"),
            allowed_hosts=[*args.allowed_host, *_listed("FACTNODE_MCP_ALLOWED_HOSTS")],
            allowed_origins=[*args.allowed_origin, *_listed("FACTNODE_MCP_ALLOWED_ORIGINS")],
        )  # fmt: skip
    return mcp_server.main(
        args.address, token=args.token, ca_cert=args.ca_cert, timeout=args.timeout
    )


def console(args: argparse.Namespace) -> int:
    """Serves the web console on `--listen`, talking to the node at `--address`.

    The rule of every face that listens (`is_loopback`, as for `serve` and `mcp --http`): a
    non-loopback --listen needs credentials, and the console's are the node's own tokens,
    which its users sign in with; a node that answers a call without a token has none, so
    the console refuses to start in front of it."""
    # gRPC's own log lines (a failed TLS handshake, a user's GRPC_TRACE) stay out of its
    # output: it reports what fails in its pages and its own words.
    rerun_quietly(["-m", "factnode.cli", *args.words])
    from factnode.config import is_loopback
    from factnode.console import ConsoleSettings, host_names, node_without_tokens, serve

    host, sep, port = args.listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        print(f"factnode console: --listen must be HOST:PORT, got {args.listen!r}", file=sys.stderr)
        return EXIT_USAGE
    host = host.strip("[]")
    if args.ca_cert and not Path(args.ca_cert).is_file():
        print(
            f"factnode console: --ca-cert {args.ca_cert!r} is not a readable file", file=sys.stderr
        )
        return EXIT_USAGE
    configured = [*os.environ.get("FACTNODE_CONSOLE_ALLOW_HOSTS", "").split(","), *args.allow_host]
    hosts = host_names(host, configured)
    if not hosts:
        print(
            f"factnode console: --listen {args.listen} names no host a browser would send: give "
            "the names the console is reached by with --allow-host (or "
            "FACTNODE_CONSOLE_ALLOW_HOSTS)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    settings = ConsoleSettings(
        args.address, token=args.token, ca_cert=args.ca_cert or None, timeout=args.timeout,
        allowed_hosts=hosts, listen=args.listen, session_seconds=args.session_hours * 3600,
    )  # fmt: skip
    if not is_loopback(args.listen):
        open_node = asyncio.run(node_without_tokens(settings))
        if open_node is True:
            print(
                f"factnode console: --listen {args.listen} is not loopback, and the node at "
                f"{args.address} has no client tokens configured (it answered a call without "
                "one): configure the node's `tokens` setting (users sign in to the console "
                "with them) or listen on 127.0.0.1",
                file=sys.stderr,
            )
            return EXIT_USAGE
        if open_node is not False:
            # Not refused: no sign-in succeeds while the node takes calls without a token.
            print(
                f"factnode console: could not check that the node at {args.address} has "
                f"tokens ({open_node.code}: {open_node}); each sign-in checks it again",
                file=sys.stderr,
            )
    # uvicorn shuts down gracefully on SIGTERM, then raises it again with the handler that
    # was in place before it: that one makes the exit a clean 0, as for Ctrl-C.
    signal.signal(signal.SIGTERM, _exit_ok)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            serve(settings, host, int(port), announce=lambda line: print(line, flush=True))
    except OSError as exc:  # the port is taken, or the host is not this machine's
        print(f"factnode console: cannot listen on {args.listen}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _exit_ok(signum: int, frame: object) -> None:
    raise SystemExit(EXIT_OK)
