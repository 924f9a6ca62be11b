"""Reading deploy/ as the tools would: compose files with their `${VAR}` interpolation,
Kubernetes manifests as YAML documents."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
K8S = DEPLOY / "k8s" / "base"
TEST_TOKENS = {
    "FACTNODE_OPERATOR_TOKEN": "op-test-token-0001",
    "FACTNODE_AGENT_TOKEN": "agent-test-token-01",
}

# Compose's forms used here: ${VAR}, ${VAR:-default}, ${VAR:?error}.
_VAR = re.compile(r"\$\{(\w+)(?::([?-])([^}]*))?\}")


class MissingVariable(Exception):
    """A required `${VAR:?message}` is unset or empty; carries compose's message."""


def interpolate(value: Any, env: Mapping[str, str]) -> Any:
    """`value` with variables replaced as `docker compose` does for these forms."""
    if isinstance(value, str):

        def one(m: re.Match[str]) -> str:
            name, op, arg = m.group(1), m.group(2), m.group(3)
            found = env.get(name, "")
            if found:
                return found
            if op == "?":
                raise MissingVariable(f"{name}: {arg}")
            return arg if op == "-" else ""

        return _VAR.sub(one, value)
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    return value


def compose_raw() -> dict[str, Any]:
    """The compose file as YAML (anchors and merge keys resolved), before interpolation."""
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


def compose(env: Mapping[str, str]) -> dict[str, Any]:
    """The compose file as `docker compose config` would see it with `env`."""
    result = interpolate(compose_raw(), env)
    assert isinstance(result, dict)
    return result


def compose_env(service: str, env: Mapping[str, str] = TEST_TOKENS) -> dict[str, str]:
    """The environment compose gives `service`'s container."""
    environment = compose(env)["services"][service].get("environment", {})
    return {k: str(v) for k, v in environment.items()}


def k8s_documents() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object of deploy/k8s/base (kustomization.yaml is not one)."""
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs += [(path, d) for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    """The one object of that kind and name."""
    found = [d for _, d in k8s_documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def read_until(proc: subprocess.Popen[str], marker: str, timeout: float) -> list[str]:
    """Lines from proc's stdout up to and including the one containing marker."""
    assert proc.stdout is not None
    stdout = proc.stdout
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def drain() -> None:
        for line in iter(stdout.readline, ""):
            lines.put(line)
            if marker in line:
                return

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            seen.append(lines.get(timeout=left))
        except queue.Empty:
            break
        if marker in seen[-1]:
            return seen
    pytest.fail(f"no {marker!r} within {timeout}s; output:\n{''.join(seen)}")
