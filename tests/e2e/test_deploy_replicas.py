"""The replicas' deployment shapes (specification §10), checked offline: compose's `replicas` profile
and the Kubernetes overlay deploy/k8s/replicas, each three replicas of one node on an
external PostgreSQL URL."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from _deploy import DEPLOY, ROOT, TEST_TOKENS, compose, compose_env

from factnode.cli import build_parser
from factnode.config import ConfigError, check_exposure, load_settings

OVERLAY = DEPLOY / "k8s" / "replicas"
K8S_VERSIONS = ("1.32.0", "1.37.0")
DATABASE = "postgresql+psycopg://factnode:secret@db.example:5432/factnode"


def _replica_settings(env: dict[str, str]) -> Any:
    return load_settings(DEPLOY / "cluster" / "replicas.toml", env=env)


def test_compose_replicas_profile_runs_three_replicas_of_one_node_on_the_database() -> None:
    """The `replica` service runs only under the `replicas` profile, three of it, on the one
    image with the tokens and FACTNODE_DATABASE_URL; the federation's nodes run without it."""
    services = compose({**TEST_TOKENS, "FACTNODE_DATABASE_URL": DATABASE})["services"]
    replica = services["replica"]
    assert replica["profiles"] == ["replicas"] and replica["deploy"]["replicas"] == 3
    assert replica["image"] == services["node-a"]["image"]
    assert all("profiles" not in services[n] for n in ("certs", "node-a", "node-b", "node-c"))
    env = compose_env("replica", {**TEST_TOKENS, "FACTNODE_DATABASE_URL": DATABASE})
    assert env["FACTNODE_DATABASE_URL"] == DATABASE
    assert env["FACTNODE_TOKENS"] == compose_env("node-a")["FACTNODE_TOKENS"]
    mounts = [m.split(":") for m in replica["volumes"]]
    assert ["./cluster/replicas.toml", "/etc/factnode/factnode.toml", "ro"] in mounts
    assert "replicas" in services["certs"]["command"][0].split("||", 1)[1].split()


def test_compose_replica_config_serves_tls_on_the_database_and_refuses_without_its_url() -> None:
    """The replicas' config with compose's environment: one node on the database URL, TLS
    with the shared certificate, no federation of its own, exposable with the tokens; an
    unset FACTNODE_DATABASE_URL (compose gives "") is refused naming database_url."""
    env = compose_env("replica", {**TEST_TOKENS, "FACTNODE_DATABASE_URL": DATABASE})
    settings = _replica_settings(env)
    assert settings.db_url == DATABASE and settings.tls_enabled and not settings.federated
    assert settings.tls_cert == Path("/etc/factnode/certs/replicas.crt")
    assert settings.lease_seconds == 5
    check_exposure(settings)
    with pytest.raises(ConfigError, match="database_url"):
        _replica_settings(compose_env("replica"))


def _rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_replicas_overlay_renders_valid_manifests(version: str) -> None:
    """`kubectl kustomize deploy/k8s/replicas` (offline) gives a ConfigMap, the client Service
    and a Deployment, no StatefulSet and no headless Service; each validates strictly."""
    docs = _rendered()
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == [
        ("ConfigMap", "factnode"),
        ("Deployment", "factnode"),
        ("Service", "factnode-client"),
    ]
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{doc['kind']} {doc['metadata']['name']}: {exc}")


def test_k8s_replicas_are_three_pods_behind_the_client_service_on_the_secret_url(
    tmp_path: Path,
) -> None:
    """Three replicas whose pods the client Service selects on their client port; the
    database URL comes from the factnode-database Secret (documented in docs/operations/deployment.md) and the
    rendered config, with the container's environment, is one TLS node on that URL."""
    docs = {d["kind"]: d for d in _rendered()}
    deployment, service = docs["Deployment"], docs["Service"]
    assert deployment["spec"]["replicas"] == 3
    pod = deployment["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    container = pod["spec"]["containers"][0]
    ports = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    build_parser().parse_args(container["command"][1:])
    env = {e["name"]: e for e in container["env"]}
    url = env["FACTNODE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert url == {"name": "factnode-database", "key": "url"}
    secrets = {e["valueFrom"]["secretKeyRef"]["name"] for e in env.values() if "valueFrom" in e}
    secrets |= {v["secret"]["secretName"] for v in pod["spec"]["volumes"] if "secret" in v}
    readme = (ROOT / "docs" / "operations" / "deployment.md").read_text()
    for secret in secrets:
        assert f"secret generic {secret}" in readme, (
            f"the deployment page must say how to create {secret}"
        )
    values = {name: e["value"] for name, e in env.items() if "value" in e}
    assert "start.sh" not in docs["ConfigMap"]["data"]  # the base's peer list is gone
    config = tmp_path / "factnode.toml"
    config.write_text(docs["ConfigMap"]["data"]["factnode.toml"])
    settings = load_settings(config, env={**values, "FACTNODE_DATABASE_URL": DATABASE})
    assert settings.db_url == DATABASE and settings.tls_enabled and not settings.federated
