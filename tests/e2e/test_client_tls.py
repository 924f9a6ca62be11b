"""factnode.Client and factnode.AsyncClient over TLS with bearer tokens, on a real node."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _e2e import ServerProcess, start_server

import factnode
from factnode.certs import issue_node_cert

READER, WRITER = "tls-reader-token", "tls-writer-token"


@pytest.fixture(scope="module")
def tls_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    """A node speaking TLS on its client port, with a reader and a `team:*` writer token."""
    workdir = tmp_path_factory.mktemp("client-tls")
    certs = workdir / "certs"
    crt, key = issue_node_cert(certs, "localhost")
    config = workdir / "factnode.toml"
    config.write_text(
        f'[tls]\ncert = "{crt}"\nkey = "{key}"\n\n'
        f'[[tokens]]\ntoken = "{READER}"\nroles = ["reader"]\nname = "ravi"\n\n'
        f'[[tokens]]\ntoken = "{WRITER}"\nroles = ["writer"]\nnamespaces = ["team:*"]\n'
        'name = "wanda"\n'
    )
    server = start_server(workdir, "--config", str(config))
    try:
        yield server, certs / "ca.crt"
    finally:
        server.stop()


def test_client_submits_and_reads_over_tls_with_its_token(
    tls_node: tuple[ServerProcess, Path],
) -> None:
    """With the CA and a writer token the client writes in its namespace; a reader reads it."""
    server, ca = tls_node
    key = (f"team:{uuid.uuid4().hex[:8]}", "ana", "lives_in")
    with factnode.Client(server.address, token=WRITER, ca_cert=ca) as writer:
        assert writer.submit(key, "Porto", "user_stated", source="ana").decision.outcome == (
            "ACCEPTED"
        )
        with pytest.raises(factnode.PermissionDenied) as outside:
            writer.submit(("secret:hr", "ana", "salary"), "1", "user_stated", source="ana")
        assert outside.value.code == "PERMISSION_DENIED"
    with factnode.Client(server.address, token=READER, ca_cert=ca) as reader:
        assert reader.belief(key).object == "Porto"
        with pytest.raises(factnode.PermissionDenied):
            reader.submit(key, "Faro", "user_stated", source="ana")
        assert reader.belief(key).object == "Porto"


def test_client_without_token_or_ca_is_refused(tls_node: tuple[ServerProcess, Path]) -> None:
    """No token is UNAUTHENTICATED; no CA fails the TLS handshake and reads as Unavailable."""
    server, ca = tls_node
    with factnode.Client(server.address, ca_cert=ca) as anonymous:
        with pytest.raises(factnode.PermissionDenied) as err:
            anonymous.status()
        assert err.value.code == "UNAUTHENTICATED"
    plain = factnode.Client(server.address, token=READER, retries=1, backoff=0.01, timeout=3)
    with plain, pytest.raises(factnode.Unavailable):
        plain.status()


def test_async_client_over_tls_with_its_token(tls_node: tuple[ServerProcess, Path]) -> None:
    """AsyncClient takes the same CA and token options and is held to the same roles."""
    server, ca = tls_node
    key = (f"team:{uuid.uuid4().hex[:8]}", "ana", "lives_in")

    async def run() -> None:
        async with factnode.AsyncClient(server.address, token=WRITER, ca_cert=ca) as writer:
            done = await writer.submit(key, "Porto", "user_stated", source="ana")
            assert done.decision.outcome == "ACCEPTED"
        async with factnode.AsyncClient(server.address, token=READER, ca_cert=ca) as reader:
            assert (await reader.belief(key)).object == "Porto"
            with pytest.raises(factnode.PermissionDenied):
                await reader.submit(key, "Faro", "user_stated", source="ana")

    asyncio.run(run())
