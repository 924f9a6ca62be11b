"""Fixtures for the e2e tests: one real node per module, a channel to it, and the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from _e2e import Cli, ServerProcess, isolated_env, open_channel, start_server

from factnode.api.v1 import factnode_pb2_grpc as pb_grpc


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One node without tokens, shared by a module's tests (they use unique namespaces)."""
    srv = start_server(tmp_path_factory.mktemp("node"))
    try:
        yield srv
    finally:
        if srv.stop() is None:
            pytest.fail(f"the node needed SIGKILL to stop: {srv.output()}")


@pytest.fixture(scope="module")
def channel(server: ServerProcess) -> Iterator[grpc.Channel]:
    """A channel to the module's node."""
    ch = open_channel(server.address)
    try:
        yield ch
    finally:
        ch.close()


@pytest.fixture(scope="module")
def facts(channel: grpc.Channel) -> pb_grpc.FactServiceStub:
    """FactService on the module's node."""
    return pb_grpc.FactServiceStub(channel)


@pytest.fixture(scope="module")
def admin(channel: grpc.Channel) -> pb_grpc.AdminServiceStub:
    """AdminService on the module's node."""
    return pb_grpc.AdminServiceStub(channel)


@pytest.fixture(scope="module")
def cli(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """The CLI pointed at the module's node."""
    return Cli(server.address, isolated_env(tmp_path_factory.mktemp("cli-home")))
