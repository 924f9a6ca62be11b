"""Fixtures the integration tests share: three in-process federated nodes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from factnode.testing import Federation


@pytest.fixture
def fed() -> Iterator[Federation]:
    """Nodes a, b and c, in process, each with a real certificate from one CA (a module
    that needs them set up otherwise defines its own `fed`)."""
    federation = Federation(["a", "b", "c"])
    try:
        yield federation
    finally:
        federation.close()
