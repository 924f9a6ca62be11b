"""`factnode health`: asks a node's `grpc.health.v1` service whether it is serving.

Container and Kubernetes probes call it, so it speaks TLS when given the CA (the client
port may be TLS-only) and needs no token (the health service is open). It answers with
its exit code: 0 serving, 1 not serving, 2 usage (e.g. an unreadable CA file),
3 unreachable.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

EXIT_SERVING, EXIT_NOT_SERVING, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3


def check(
    address: str,
    service: str = "",
    ca_cert: Path | None = None,
    server_name: str | None = None,
    timeout: float = 3.0,
) -> str:
    """The status the node reports for `service` ('' = the whole node), e.g. SERVING."""
    options: list[tuple[str, Any]] = []
    if ca_cert is not None:
        creds = grpc.ssl_channel_credentials(ca_cert.read_bytes())
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        channel = grpc.secure_channel(address, creds, options=options)
    else:
        channel = grpc.insecure_channel(address)
    with channel:
        response = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def add_command(sub: Any) -> None:
    """Adds `health` to the `factnode` subcommands."""
    p = sub.add_parser(
        "health",
        help="ask a node's grpc.health.v1 service whether it serves (exit 0 when it does)",
    )
    p.add_argument(
        "--address",
        default=os.environ.get("FACTNODE_ADDRESS", "127.0.0.1:7420"),
        help="node to ask (env FACTNODE_ADDRESS; default %(default)s)",
    )
    p.add_argument(
        "--ca-cert",
        default=os.environ.get("FACTNODE_CA_CERT"),
        help="CA certificate when the node's client port uses TLS (env FACTNODE_CA_CERT)",
    )
    p.add_argument(
        "--server-name",
        help="name to verify in the node's certificate when the address does not carry it",
    )
    p.add_argument(
        "--service", default="", help="one service, e.g. factnode.v1.FactService (default: node)"
    )
    p.add_argument(
        "--timeout", type=float, default=3.0, help="seconds to wait (default %(default)s)"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"status": ...} (or the error object) as JSON on stdout; same exit codes',
    )


class Probe(NamedTuple):
    """What a probe found: the serving status (SERVING, ...), or for a failure the gRPC
    status name (UNAVAILABLE, NOT_FOUND) or USAGE, with the words; and the exit code."""

    status: str
    exit_code: int
    failure: str = ""


def probe(args: argparse.Namespace) -> Probe:
    """Asks the node `args` name; never raises for an unreachable node or a bad CA file."""
    try:
        status = check(
            args.address,
            args.service,
            Path(args.ca_cert) if args.ca_cert else None,
            args.server_name,
            args.timeout,
        )
    except OSError as exc:
        return Probe("USAGE", EXIT_USAGE, str(exc))
    except grpc.RpcError as err:
        code = err.code()
        if code == grpc.StatusCode.NOT_FOUND:
            return Probe(
                code.name, EXIT_NOT_SERVING, f"{args.address} knows no service {args.service!r}"
            )
        return Probe(
            code.name, EXIT_UNREACHABLE, f"cannot reach {args.address} ({code.name.lower()})"
        )
    return Probe(status, EXIT_SERVING if status == "SERVING" else EXIT_NOT_SERVING)


def run(args: argparse.Namespace) -> int:
    """Prints the status and returns the exit code a probe reads."""
    found = probe(args)
    if not found.failure:
        print(found.status)
    elif found.status == "NOT_FOUND":
        print(f"factnode health: {found.failure}")
    else:
        print(f"factnode health: {found.failure}", file=sys.stderr)
    return found.exit_code
