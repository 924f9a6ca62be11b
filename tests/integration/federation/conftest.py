"""Fixtures for the federation tests: real nodes that peer over mTLS, stopped at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest
from _fednet import Federation, StartFederation


@pytest.fixture(scope="module")
def start_federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartFederation]:
    """Starts federations of real `factnode serve` processes; stops every one at teardown
    (SIGTERM, a bounded wait, SIGKILL as a fallback) and fails if one needed SIGKILL."""
    started: list[Federation] = []

    def start(
        node_ids: Sequence[str],
        foreign: Sequence[str] = (),
        absent: Sequence[str] = (),
        configure: Callable[[Federation], None] | None = None,
    ) -> Federation:
        fed = Federation(tmp_path_factory.mktemp("fed"), node_ids, foreign)
        if configure is not None:
            configure(fed)
        started.append(fed)
        fed.start(absent)
        return fed

    yield start
    killed = [n for fed in started for n in fed.stop()]
    assert not killed, f"nodes needed SIGKILL to stop: {killed}"
