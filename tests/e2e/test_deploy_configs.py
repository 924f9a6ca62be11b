"""deploy/ checked without a Docker engine or a cluster: schemas, references, and the
commands the compose file, the image and the manifests run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from _deploy import (
    COMPOSE,
    DEPLOY,
    K8S,
    ROOT,
    TEST_TOKENS,
    MissingVariable,
    compose,
    compose_raw,
    k8s_documents,
    k8s_object,
)
from _e2e import Cli, free_port, isolated_env, start_server

from factnode.cli import build_parser
from factnode.config import load_settings

# The oldest Kubernetes still maintained upstream when this was written, and the newest
# kubernetes-validate knows; the manifests must be valid for both.
K8S_VERSIONS = ("1.32.0", "1.37.0")


def _parses_as_factnode(argv: list[str]) -> None:
    """`argv` is a `factnode` command line the CLI accepts."""
    assert argv[0] == "factnode", argv
    build_parser().parse_args(argv[1:])


# -- compose --------------------------------------------------------------------------


def test_compose_file_is_valid_against_the_compose_spec() -> None:
    """docker-compose.yml validates against the compose-spec schema (vendored by check-jsonschema)."""
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    jsonschema.validate(compose(TEST_TOKENS), schema)


def test_compose_builds_one_image_for_every_service() -> None:
    """One service builds the image; every service runs that same image, none builds its own."""
    services = compose(TEST_TOKENS)["services"]
    builders = [name for name, s in services.items() if "build" in s]
    assert builders == ["certs"]
    assert {s["image"] for s in services.values()} == {"factnode:local"}


def test_compose_refuses_to_start_without_tokens() -> None:
    """Without the two tokens in the environment, compose stops with a message naming them."""
    assert "change-me" not in COMPOSE.read_text()
    with pytest.raises(MissingVariable, match="FACTNODE_OPERATOR_TOKEN"):
        compose({"FACTNODE_AGENT_TOKEN": "x"})
    with pytest.raises(MissingVariable, match="FACTNODE_AGENT_TOKEN"):
        compose({"FACTNODE_OPERATOR_TOKEN": "x", "FACTNODE_AGENT_TOKEN": ""})
    tokens = json.loads(
        compose(TEST_TOKENS)["services"]["node-a"]["environment"]["FACTNODE_TOKENS"]
    )
    assert {t["token"] for t in tokens} == set(TEST_TOKENS.values())


def test_every_file_compose_references_exists() -> None:
    """Build context, Dockerfile, bind-mounted configs and the env example are in the repo."""
    services = compose(TEST_TOKENS)["services"]
    build = services["certs"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert context == ROOT
    assert (context / build["dockerfile"]).is_file()
    declared = set(compose_raw()["volumes"])
    for service in services.values():
        for mount in service.get("volumes", []):
            source = mount.split(":", 1)[0]
            if source.startswith("."):
                assert (DEPLOY / source).is_file(), mount
            else:
                assert source in declared, mount
    assert "deploy/env.example" in COMPOSE.read_text()
    assert (DEPLOY / "env.example").is_file()


def test_compose_commands_are_factnode_commands() -> None:
    """The certs service's command and the nodes' default command parse with the real CLI."""
    certs = compose(TEST_TOKENS)["services"]["certs"]
    assert certs["entrypoint"] == ["/bin/sh", "-c"]
    script = certs["command"][0]
    make = script.split("||", 1)[1]
    _parses_as_factnode(shlex.split(make))


# -- the image --------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    lines = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    out = []
    for line in lines:
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_every_file_the_dockerfile_copies_exists() -> None:
    """COPY sources exist in the build context (the repository root) and are not ignored."""
    copied = [rest.split()[:-1] for word, rest in _dockerfile_instructions() if word == "COPY"]
    sources = [s for group in copied for s in group]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), source
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text()
    for source in sources:
        assert f"!{source}" in ignore or f"!{source}/**" in ignore, source


def test_the_image_runs_as_a_fixed_unprivileged_user() -> None:
    """USER is the uid the compose volumes and the manifests' securityContext expect."""
    instructions = dict(_dockerfile_instructions())
    assert instructions["USER"] == "factnode:factnode"
    assert "FACTNODE_UID=10001" in instructions["ARG"]
    pod = k8s_object("StatefulSet", "factnode")["spec"]["template"]["spec"]["securityContext"]
    assert pod["runAsUser"] == pod["runAsGroup"] == pod["fsGroup"] == 10001
    assert json.loads(instructions["ENTRYPOINT"]) == ["factnode"]
    _parses_as_factnode(["factnode", *json.loads(instructions["CMD"])])


def test_the_image_health_check_is_a_factnode_command() -> None:
    """HEALTHCHECK runs `factnode health`, which the CLI accepts."""
    healthcheck = dict(_dockerfile_instructions())["HEALTHCHECK"]
    exec_form = healthcheck.split("CMD", 1)[1].strip()
    _parses_as_factnode(json.loads(exec_form))


# -- Kubernetes -------------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_are_valid(version: str) -> None:
    """Every manifest validates, strictly (no unknown fields), against the Kubernetes schemas."""
    docs = k8s_documents()
    assert {d["kind"] for _, d in docs} == {"ConfigMap", "Service", "StatefulSet"}
    for path, doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)  # raises when invalid
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path.name}: {exc}")


def test_k8s_invalid_manifest_is_caught() -> None:
    """The validator runs offline and refuses a wrong field, so the check above means something."""
    broken: dict[str, Any] = json.loads(json.dumps(k8s_object("StatefulSet", "factnode")))
    broken["spec"]["replicas"] = "three"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_k8s_statefulset_has_a_volume_per_node_a_headless_service_and_probes() -> None:
    """One PVC per pod, a headless governing Service, health probes and a non-root container."""
    sts = k8s_object("StatefulSet", "factnode")
    headless = k8s_object("Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    claims = sts["spec"]["volumeClaimTemplates"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    data_mount = next(
        m for m in container["volumeMounts"] if m["name"] == claims[0]["metadata"]["name"]
    )
    assert data_mount["mountPath"] == "/var/lib/factnode"
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        _parses_as_factnode(container[probe]["exec"]["command"])
        assert container[probe]["exec"]["command"][1] == "health"
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"]
    replicas = next(e for e in container["env"] if e["name"] == "FACTNODE_REPLICAS")
    assert int(replicas["value"]) == sts["spec"]["replicas"]


def test_every_object_and_file_the_manifests_reference_exists() -> None:
    """Kustomize resources exist; mounted ConfigMap keys exist; Secrets are the documented two."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource
    assert {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"} == set(
        kustomization["resources"]
    )
    pod = k8s_object("StatefulSet", "factnode")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    container = pod["containers"][0]
    for mount in container["volumeMounts"]:
        source = volumes.get(mount["name"])
        if source and "configMap" in source:
            data = k8s_object("ConfigMap", source["configMap"]["name"])["data"]
            assert mount["subPath"] in data, mount
    secrets = {v["secret"]["secretName"] for v in volumes.values() if "secret" in v}
    secrets |= {
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secrets == {"factnode-certs", "factnode-tokens"}
    readme = (ROOT / "docs" / "operations" / "deployment.md").read_text()
    for secret in secrets:
        assert f"secret generic {secret}" in readme, (
            f"docs/operations/deployment.md must say how to create {secret}"
        )


def test_k8s_start_script_peers_with_every_other_pod(tmp_path: Path) -> None:
    """start.sh hands `factnode serve` every other pod as a peer, never the pod itself."""
    configmap = k8s_object("ConfigMap", "factnode")["data"]
    (tmp_path / "factnode.toml").write_text(configmap["factnode.toml"])
    # A stand-in `factnode` on PATH records what the script would start the node with.
    shim = tmp_path / "bin" / "factnode"
    shim.parent.mkdir()
    shim.write_text(
        '#!/bin/sh\nprintf "%s\\n" "$*" > "$OUT.args"\nprintf "%s" "$FACTNODE_PEERS" > "$OUT.peers"\n'
    )
    shim.chmod(0o755)
    env = {
        "PATH": f"{shim.parent}:{os.environ['PATH']}",
        "POD_NAME": "factnode-1",
        "FACTNODE_REPLICAS": "3",
        "OUT": str(tmp_path / "out"),
    }
    subprocess.run(["sh", "-c", configmap["start.sh"]], env=env, check=True, timeout=30)
    argv = ["factnode", *(tmp_path / "out.args").read_text().split()]
    _parses_as_factnode(argv)
    peers_json = (tmp_path / "out.peers").read_text()
    settings = load_settings(
        tmp_path / "factnode.toml",
        env={
            "FACTNODE_PEERS": peers_json,
            "FACTNODE_FEDERATION_CERT": "c.crt",
            "FACTNODE_FEDERATION_KEY": "c.key",
        },
    )
    assert [(p.node_id, p.address) for p in settings.peers] == [
        ("factnode-0", "factnode-0.factnode:7421"),
        ("factnode-2", "factnode-2.factnode:7421"),
    ]


# -- what the containers run, run here ---------------------------------------------------


def test_a_compose_node_serves_tls_and_its_health_checks_pass(tmp_path: Path) -> None:
    """The certs service's command, then node-a's config and environment: the image's and the
    manifests' health commands report SERVING over TLS, and the tokens guard the API."""
    certs = tmp_path / "certs"
    script = compose(TEST_TOKENS)["services"]["certs"]["command"][0]
    script = script.replace("/etc/factnode/certs", str(certs)).replace(
        "factnode certs", f"{shlex.quote(sys.executable)} -m factnode.cli certs"
    )
    home = tmp_path / "home"
    env = isolated_env(home)
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=60, capture_output=True)
    assert (certs / "node-a.key").stat().st_mode & 0o777 == 0o600
    first_key = (certs / "node-a.key").read_bytes()
    subprocess.run(["sh", "-c", script], env=env, check=True, timeout=60, capture_output=True)
    assert (certs / "node-a.key").read_bytes() == first_key, "a second `up` must keep the certs"

    config = (DEPLOY / "cluster" / "node-a.toml").read_text()
    config = (
        config.replace("/etc/factnode/certs", str(certs))
        .replace("/var/lib/factnode", str(tmp_path / "data"))
        .replace("0.0.0.0:7421", f"127.0.0.1:{free_port()}")
    )
    (tmp_path / "node-a.toml").write_text(config)
    node_env = {**env, **compose(TEST_TOKENS)["services"]["node-a"]["environment"]}
    node_env["FACTNODE_CA_CERT"] = str(certs / "ca.crt")
    server = start_server(tmp_path, "--config", str(tmp_path / "node-a.toml"), env=node_env)
    try:
        cli = Cli(server.address, node_env)
        dockerfile_check = ["health", "--address", server.address, "--timeout", "3"]
        assert cli.run(*dockerfile_check, with_address=False).stdout.strip() == "SERVING"
        # Without the CA the TLS handshake fails: a plaintext probe cannot pass.
        plain = {k: v for k, v in node_env.items() if k != "FACTNODE_CA_CERT"}
        assert Cli(server.address, plain).run(*dockerfile_check, with_address=False, check=3)
        status = cli.json("status", "--token", TEST_TOKENS["FACTNODE_OPERATOR_TOKEN"])
        assert status["node_id"] == "node-a"
        cli.run("status", "--token", "wrong", check=4)
    finally:
        assert server.stop() is not None
