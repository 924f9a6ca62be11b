"""`factnode health`: the grpc.health.v1 check that the image and the manifests run."""

from __future__ import annotations

from _e2e import Cli, free_port


def test_health_reports_serving_for_a_running_node(cli: Cli) -> None:
    """A running node answers SERVING and the command exits 0."""
    assert cli.run("health").stdout.strip() == "SERVING"


def test_health_of_one_service(cli: Cli) -> None:
    """A named service of the node is checked on its own; an unknown one exits 1."""
    assert cli.run("health", "--service", "factnode.v1.FactService").stdout.strip() == "SERVING"
    unknown = cli.run("health", "--service", "no.such.Service", check=1)
    assert "no.such.Service" in unknown.stdout


def test_health_of_a_node_that_is_not_there_exits_3(cli: Cli) -> None:
    """Nothing listening: exit 3 (unreachable) with a one-line message, no traceback."""
    result = cli.run("health", "--timeout", "2", address=f"127.0.0.1:{free_port()}", check=3)
    assert "cannot reach" in result.stderr


def test_health_with_an_unreadable_ca_exits_2(cli: Cli) -> None:
    """A CA file that cannot be read is a usage error (exit 2) naming the file."""
    result = cli.run("health", "--ca-cert", "/nonexistent/ca.crt", check=2)
    assert "/nonexistent/ca.crt" in result.stderr
