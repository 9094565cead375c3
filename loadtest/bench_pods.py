"""What kube mode's Pod watch costs in memory, per 10,000 pods.

Pods are generated as the API server serves them (managedFields, labels,
annotations, owner references, containers with env and mounts, the projected
token volume, tolerations, status conditions and container statuses, about
6 KiB of JSON each), every one with a claim from a template, as on a GPU
cluster where every pod holds devices. They go through the source's own
path: `parse_live_pod`, `Inventory.replacing_parsed`; what stays allocated
after the raw objects are dropped is measured with tracemalloc. Two figures
in the same run set it in proportion:

- `raw`: the same pods kept as decoded JSON (what an informer that stores
  whole objects would hold), the baseline;
- `no-claims`: as many bound pods without claims, which the source keeps
  only as their requests on their node (`Inventory.usage`).

    .venv/bin/python -m loadtest.bench_pods [--pods 10000] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

from app.inventory import Inventory
from app.sources.kube.watch import parse_live_pod


def make_pod(i: int, *, claims: bool = True) -> dict[str, Any]:
    name = f"train-{i // 8:05d}-{i % 8}-x{i:06x}"
    node = f"gpu-node-{i // 8:05d}"
    labels = {"app.kubernetes.io/name": "trainer", "app.kubernetes.io/instance": f"run-{i // 64}",
              "pod-template-hash": f"{i // 8 * 7919 % 10**10:010d}", "team": f"team-{i // 64 % 13}"}
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": f"ns-{i % 17}", "uid": f"{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(100000 + i), "creationTimestamp": "2026-12-04T10:00:00Z",
            "generateName": name[:-7], "labels": labels,
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T09:00:00Z",
                            "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": name[:-7], "uid": f"rs-{i // 8:08x}",
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update",
                 "apiVersion": "v1", "time": "2026-12-04T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels},
                                             "f:ownerReferences": {}},
                              "f:spec": {"f:containers": {'k:{"name":"main"}': {
                                  "f:image": {}, "f:env": {}, "f:resources": {}}},
                                  "f:resourceClaims": {}, "f:priorityClassName": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-12-04T10:00:05Z", "fieldsType": "FieldsV1",
                 "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {}, "f:containerStatuses": {},
                                           "f:podIP": {}, "f:startTime": {}}}}]},
        "spec": {
            "schedulerName": "drax", "nodeName": node, "priority": 1000,
            "priorityClassName": "batch-low", "preemptionPolicy": "PreemptLowerPriority",
            "serviceAccountName": "trainer", "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "containers": [{
                "name": "main", "image": "registry.example.com/ml/trainer:2026.12.1",
                "command": ["python", "-m", "trainer"], "args": ["--epochs", "90"],
                "env": [{"name": f"TRAINER_OPTION_{k}", "value": f"value-{k}"}
                        for k in range(8)],
                "resources": {"requests": {"cpu": "8", "memory": "64Gi"},
                              "limits": {"memory": "64Gi"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300},
                            {"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}]},
        "status": {
            "phase": "Running", "podIP": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}",
            "hostIP": "192.168.0.10", "startTime": "2026-12-04T10:00:02Z", "qosClass": "Burstable",
            "conditions": [{"type": t, "status": "True",
                            "lastTransitionTime": "2026-12-04T10:00:04Z"}
                           for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                     "ContainersReady", "PodScheduled")],
            "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                   "image": "registry.example.com/ml/trainer:2026.12.1",
                                   "imageID": "registry.example.com/ml/trainer@sha256:" + "a" * 64,
                                   "containerID": f"containerd://{i:064x}", "started": True,
                                   "state": {"running": {"startedAt": "2026-12-04T10:00:03Z"}}}]},
    }
    if claims:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "1gpu"}]
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu",
                                                   "resourceClaimName": f"{name}-gpu-abcde"}]
        pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return pod


def _retained(build: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated once `build` returned (what it returned keeps alive)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, kept


def _through_source(encoded: list[bytes]) -> Inventory:
    """The Pod informer's path, a page of 500 at a time as the list is read."""
    inventory = Inventory(expected_kinds=["Pod"])
    parsed: list[Any] = []
    for start in range(0, len(encoded), 500):
        page = [orjson.loads(raw) for raw in encoded[start:start + 500]]
        parsed.extend(parse_live_pod("Pod", o) for o in page)
        del page
    for _ in inventory.replacing_parsed("Pod", parsed):
        pass
    return inventory


def run(pods: int) -> dict[str, Any]:
    with_claims = [orjson.dumps(make_pod(i)) for i in range(pods)]
    without = [orjson.dumps(make_pod(i, claims=False)) for i in range(pods)]
    raw_bytes, raw = _retained(lambda: [orjson.loads(b) for b in with_claims])
    del raw
    inv_bytes, inventory = _retained(lambda: _through_source(with_claims))
    held = sum(1 for i in range(pods) if inventory.pod(
        f"ns-{i % 17}/{make_pod(i)['metadata']['name']}") is not None)
    del inventory
    skip_bytes, skipped = _retained(lambda: _through_source(without))
    counted = sum(len(skipped.usage.on(f"gpu-node-{n:05d}").pods)
                  for n in range((pods + 7) // 8))
    del skipped
    per_10k = 10_000 / pods
    return {
        "benchmark": "pods-memory", "pods": pods, "held": held, "counted": counted,
        "jsonBytesPerPod": round(sum(map(len, with_claims)) / pods),
        "inventoryMiBPer10000": round(inv_bytes * per_10k / 2**20, 2),
        "rawMiBPer10000": round(raw_bytes * per_10k / 2**20, 2),
        "noClaimsMiBPer10000": round(skip_bytes * per_10k / 2**20, 3),
        "inventoryOverRaw": round(inv_bytes / raw_bytes, 3),
        "python": sys.version.split()[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.bench_pods", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    result = run(args.pods)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
