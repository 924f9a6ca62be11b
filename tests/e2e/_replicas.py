"""Replicas for the e2e tests: a fresh PostgreSQL database per test, and several `factnode
serve` processes on it (one node, specification §10)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from _e2e import ServerProcess, isolated_env, start_server

from factnode.client import Client
from factnode.testing import fresh_postgres_database

POSTGRES_ENV = "FACTNODE_TEST_POSTGRES_URL"
LEASE_SECONDS = 2.0  # the replicas' lease interval in these tests

T = TypeVar("T")


@contextmanager
def fresh_database() -> Iterator[str]:
    """A URL on a new PostgreSQL database, dropped on exit (advisory locks are per database,
    so replicas of other tests never share one); skips without FACTNODE_TEST_POSTGRES_URL."""
    base = os.environ.get(POSTGRES_ENV)
    if not base:
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL replica tests skipped")
    with fresh_postgres_database(base, "fn_replicas") as url:
        yield url


def start_replicas(
    workdir: Path, url: str, count: int, env: dict[str, str] | None = None
) -> list[ServerProcess]:
    """`count` replicas of one node on `url`, each with its own (unused) data directory."""
    base = isolated_env(workdir / "home")
    base.update({"FACTNODE_LEASE_SECONDS": str(LEASE_SECONDS), **(env or {})})
    replicas: list[ServerProcess] = []
    try:
        for n in range(count):
            replicas.append(
                start_server(
                    workdir,
                    "--database-url",
                    url,
                    data_dir=workdir / f"replica-{n}",
                    env=base,
                )
            )
    except BaseException:
        stop_all(replicas)
        raise
    return replicas


def stop_all(replicas: list[ServerProcess]) -> None:
    """Stops every replica still running; SIGKILL for one that does not stop."""
    for replica in replicas:
        if replica.proc.poll() is None:
            replica.stop()


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """Polls `check` until it returns something other than None; fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout}s")
        time.sleep(0.05)


def lease_holder(replica: ServerProcess) -> tuple[str, str] | None:
    """(the replica answering, the lease holder it reports), or None if it does not answer."""
    try:
        with Client(replica.address, timeout=5.0, retries=0) as client:
            status = client.status()
    except Exception:
        return None
    return status.replica, status.lease_holder
