"""Shared fixtures: a store URL on each backend, and a ledger on it with a fake clock."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from factnode.core import Policy
from factnode.ledger import Ledger
from factnode.store import SqlRepository
from factnode.testing import FakeClock

POSTGRES_ENV = "FACTNODE_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def repository_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on an empty database: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/factnode.db"
        return
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL store tests skipped")
    with postgres_schema() as url:
        yield url


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A URL on a fresh PostgreSQL schema (dropped on exit); FACTNODE_TEST_POSTGRES_URL must be set."""
    base = os.environ[POSTGRES_ENV]
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when a test moves it."""
    return FakeClock()


@pytest.fixture
def repository(repository_url: str) -> Iterator[SqlRepository]:
    """A migrated store on `repository_url`, closed at teardown."""
    repo = SqlRepository(repository_url)
    try:
        yield repo
    finally:
        repo.close()


@pytest.fixture
def ledger(repository: SqlRepository, clock: FakeClock) -> Ledger:
    """A ledger with the default policy on `repository`, driven by `clock`."""
    return Ledger(repository, Policy(), "node-test", clock)


@pytest.fixture(scope="module")
def module_postgres_url() -> Iterator[str | None]:
    """A fresh PostgreSQL schema shared by one module's tests; None when PostgreSQL is not set."""
    if not os.environ.get(POSTGRES_ENV):
        yield None
        return
    with postgres_schema() as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL schema for one test; skipped when PostgreSQL is not set."""
    if not os.environ.get(POSTGRES_ENV):
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL tests skipped")
    with postgres_schema() as url:
        yield url
