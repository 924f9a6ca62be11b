"""Which event loop `factnode serve` runs on: uvloop where installed, else asyncio's own."""

from __future__ import annotations

import asyncio
import sys

import pytest

from factnode.config import ConfigError
from factnode.server._loop import loop_factory, loop_name


def _made_by(choice: str) -> tuple[str, str]:
    name, factory = loop_factory(choice)
    loop = factory()
    try:
        return name, loop_name(loop)
    finally:
        loop.close()


def test_asyncio_is_asyncio_s_own_loop() -> None:
    assert _made_by("asyncio") == ("asyncio", "asyncio")


def test_uvloop_and_auto_give_uvloop_where_it_is_installed() -> None:
    pytest.importorskip("uvloop", reason="uvloop is not installed on this platform")
    assert _made_by("uvloop") == ("uvloop", "uvloop")
    assert _made_by("auto") == ("uvloop", "uvloop")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` now raises ImportError
    assert _made_by("auto") == ("asyncio", "asyncio")
    with pytest.raises(ConfigError) as err:
        loop_factory("uvloop")
    assert err.value.setting == "event_loop"
    assert "not installed" in err.value.reason


def test_loop_name_of_a_running_loop() -> None:
    async def name() -> str:
        return loop_name(asyncio.get_running_loop())

    assert asyncio.run(name()) == "asyncio"
