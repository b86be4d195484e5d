"""The deployment manifests, offline: every Kubernetes document passes its schema (Kubernetes' own
through kubernetes-validate, KEDA's from the vendored CRD schemas), and the numbers and names in
them agree with the code: queue names, in-flight lists, grace periods, limits, concurrency.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from engine.fleet import queue_list
from engine.keys import inflight_key
from engine.settings import Settings
from schemas.constants import ALL_QUEUES, QUEUE_EXECUTE, QUEUE_GRADE
from tests.deploy.support import COMPOSE, K8S, by_kind, config_value, container_args, flag, k8s_documents

K8S_VERSION = "1.33.0"
SCHEMAS = Path(__file__).parent / "schemas"
VENDORED = {
    ("keda.sh/v1alpha1", kind): json.loads((SCHEMAS / f"keda.sh-v1alpha1-{kind}.json").read_text())
    for kind in ("ScaledObject", "TriggerAuthentication")
}
LEASED_QUEUES = (QUEUE_EXECUTE, QUEUE_GRADE)  # the queues whose shards hold a lease while they run


def validate(doc: dict[str, Any]) -> None:
    """Raise when ``doc`` fails its schema; a kind with no known schema fails too (never passes silently)."""
    schema = VENDORED.get((doc.get("apiVersion"), doc.get("kind")))
    if schema is not None:
        jsonschema.validate(doc, schema)
    else:  # Kubernetes' own kinds; anything else raises SchemaNotFoundError
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_every_manifest_in_the_kustomization_passes_its_schema() -> None:
    docs = list(k8s_documents())
    kinds = {d["kind"] for _, d in docs}
    assert {"Deployment", "ScaledObject", "TriggerAuthentication", "Secret", "StatefulSet"} <= kinds
    for name, doc in docs:
        try:
            validate(doc)
        except Exception as exc:  # name the file and resource at fault
            raise AssertionError(f"{name}: {doc['kind']} {doc['metadata']['name']}: {exc}") from exc


def test_the_kustomization_lists_every_manifest_in_the_folder() -> None:
    listed = set(yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk


def test_the_validators_reject_a_misspelt_field_and_an_unknown_kind() -> None:
    scaled = copy.deepcopy(by_kind("ScaledObject")["skill-eval-execute"])
    scaled["spec"]["triggers"][0]["metdata"] = scaled["spec"]["triggers"][0].pop("metadata")
    with pytest.raises(jsonschema.ValidationError):
        validate(scaled)
    deployment = copy.deepcopy(by_kind("Deployment")["skill-eval-execute"])
    deployment["spec"]["template"]["spec"]["terminationGracePeriod"] = 10
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}})


def test_worker_deployments_consume_exactly_the_codes_queues() -> None:
    consumed: list[str] = []
    for deployment in by_kind("Deployment").values():
        args = container_args(deployment)
        assert args[0] == "worker"
        consumed += flag(args, "--queues").split(",")
    assert sorted(consumed) == sorted(ALL_QUEUES), "every queue consumed by exactly one Deployment"


def test_every_deployment_has_limits_and_a_grace_period_of_at_least_the_max_shard_timeout() -> None:
    ceiling = float(config_value("SKILL_EVAL_MAX_SHARD_TIMEOUT_S"))
    grace_setting = float(config_value("SKILL_EVAL_SHUTDOWN_GRACE_S"))
    assert Settings(max_shard_timeout_s=ceiling).max_shard_timeout_s == ceiling  # a value the workers accept
    for name, deployment in by_kind("Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        grace = pod["terminationGracePeriodSeconds"]
        assert grace >= ceiling, f"{name}: grace {grace} < max shard timeout {ceiling}"
        assert grace == grace_setting, f"{name}: the workers must know their grace period"
        for container in pod["containers"]:
            limits, requests = container["resources"]["limits"], container["resources"]["requests"]
            assert {"cpu", "memory"} <= set(limits) and {"cpu", "memory"} <= set(requests), name
            assert container["livenessProbe"]["exec"]["command"] == ["skill-eval", "worker", "--health"]


def test_the_execute_pods_get_what_bubblewrap_needs_inside_a_user_namespace() -> None:
    pod = by_kind("Deployment")["skill-eval-execute"]["spec"]["template"]["spec"]
    assert pod["hostUsers"] is False
    assert pod["securityContext"]["seccompProfile"]["type"] == "Unconfined"
    assert pod["securityContext"]["appArmorProfile"]["type"] == "Unconfined"
    ctx = pod["containers"][0]["securityContext"]
    assert ctx["procMount"] == "Unmasked"
    grade = by_kind("Deployment")["skill-eval-grade"]["spec"]["template"]["spec"]
    assert grade["securityContext"]["runAsNonRoot"] is True and "hostUsers" not in grade


def test_keda_scales_each_deployment_on_its_real_queue_lists_plus_work_in_flight() -> None:
    deployments = by_kind("Deployment")
    for name, scaled in by_kind("ScaledObject").items():
        target = scaled["spec"]["scaleTargetRef"]["name"]
        args = container_args(deployments[target])
        queues = flag(args, "--queues").split(",")
        concurrency = flag(args, "--concurrency")
        triggers = scaled["spec"]["triggers"]
        lists = {t["metadata"]["listName"] for t in triggers}
        assert all(t["type"] == "redis" for t in triggers)
        assert {queue_list(q) for q in queues} <= lists, f"{name}: every consumed queue's waiting list"
        assert {inflight_key(q) for q in queues if q in LEASED_QUEUES} <= lists, f"{name}: in-flight lists"
        assert lists <= {queue_list(q) for q in queues} | {inflight_key(q) for q in queues}, f"{name}: no other list"
        for t in triggers:
            assert t["metadata"]["listLength"] == concurrency and "activationListLength" in t["metadata"]
        modifiers = scaled["spec"]["advanced"]["scalingModifiers"]
        assert set(modifiers["formula"].replace("+", " ").split()) == {t["name"] for t in triggers}
        assert modifiers["target"] == concurrency
        window = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        assert window["stabilizationWindowSeconds"] >= 300


def test_the_compose_topology_matches_the_code() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert "--appendonly yes" in services["redis"]["command"]
    queues: list[str] = []
    for name in ("worker-execute", "worker-grade"):
        command = services[name]["command"]
        queues += flag(command, "--queues").split(",")
    assert sorted(queues) == sorted(ALL_QUEUES)
    assert flag(services["worker-execute"]["command"], "--concurrency") != flag(
        services["worker-grade"]["command"], "--concurrency"
    )
    execute = services["worker-execute"]
    assert {"systempaths=unconfined", "seccomp=unconfined", "apparmor=unconfined"} <= set(execute["security_opt"])
    env = services["worker-grade"]["environment"]
    assert float(env["SKILL_EVAL_SHUTDOWN_GRACE_S"]) >= float(env["SKILL_EVAL_MAX_SHARD_TIMEOUT_S"])
    assert "flower" in services and "OPENAI_API_KEY" in env
