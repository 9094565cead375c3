"""Warm standby and requeue on the real control plane: takeover time and devices-to-bound time.

    python -m loadtest.failover --rounds 3 --json loadtest/results/failover.json

One 1.37 control plane of `tests/e2e/cluster.py` with two drax replicas
(`--replicas 2`: kube-scheduler + drax each, own hostname, the Lease
kube-system/drax-scheduler), the drax kube-scheduler with exactly
manifests/deployment.yaml's flags.

- Failover, per round: a pool of 8 nodes (8 GPUs each), 48 one-GPU pods
  created at once; once 12 are bound the leader's kube-scheduler and drax get
  SIGKILL. Seconds from the kill to the standby holding the Lease, to its
  first bind, and to every pod bound. The killed replica is then started again
  (a new standby) and its pods deleted for the next round.
- Requeue, per round: a Ready node without devices and a one-GPU pod drax
  rejects; 8 s later (the pod parked among the unschedulable ones) its
  ResourceSlices are published. Seconds from the publishing to the pod bound,
  and whether drax's condition drax.dev/DevicesChanged is on the pod.

No baseline runs here: without drax's status patch the pod waits for the
queue's flush of unschedulable pods, 5 minutes by default (the deprecated
`--pod-max-in-unschedulable-pods-duration` shortened it), which the notes
give with where it was measured.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from app.binder.requeue import CONDITION
from loadtest.report import provenance
from tests.e2e.cluster import (
    LEASE,
    SAMPLE_CLASSES,
    Cluster,
    drax_name,
    make_node_ready,
    scheduler_name,
    start,
    stop,
    wait_drax_ready,
)
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import add_pool, add_templates, pod, pool_objects

PODS: Final = 48
KILL_AFTER: Final = 12
WAIT_PARKED_SECONDS: Final = 8.0


def _holder(kube: Kube) -> str:
    namespace, name = LEASE
    return str(kube.get("Lease", name, namespace)["spec"].get("holderIdentity") or "")


def _bound(kube: Kube, names: set[str]) -> set[str]:
    return {p["metadata"]["name"] for p in kube.list("Pod", "default")
            if p["metadata"]["name"] in names and p["spec"].get("nodeName")}


def failover_round(cluster: Cluster, kube: Kube, round_: int, template: str) -> dict[str, Any]:
    leader = cluster.replica_of(_holder(kube))
    if leader is None:
        raise RuntimeError(f"nobody holds the Lease (holder {_holder(kube)!r})")
    standby = 1 - leader
    names = {f"fo{round_}-{i:02d}" for i in range(PODS)}
    for name in sorted(names):
        kube.create(pod(name, scheduler="drax", template=template,
                        node_selector={"e2e/pool": "fo"}))
    wait_for(f"{KILL_AFTER} pods bound", lambda: len(_bound(kube, names)) >= KILL_AFTER)
    duration = float(kube.get("Lease", LEASE[1], LEASE[0])["spec"]["leaseDurationSeconds"])
    killed = time.monotonic()
    for name in (scheduler_name(leader), drax_name(leader)):
        cluster.kill(name, sig=signal.SIGKILL)
    before = _bound(kube, names)
    wait_for("the standby holding the Lease", lambda: cluster.replica_of(_holder(kube)) == standby,
             timeout=120)
    lease_taken = time.monotonic() - killed
    wait_for("a bind by the new leader", lambda: _bound(kube, names) - before, timeout=120,
             interval=0.05)
    first_bind = time.monotonic() - killed
    wait_for("every pod bound", lambda: _bound(kube, names) == names, timeout=180)
    all_bound = time.monotonic() - killed
    cluster.note_leader(kube)
    # The killed replica comes back as the new standby; the pool is emptied.
    for name in (drax_name(leader), scheduler_name(leader)):
        cluster.spawn(name, cluster.commands[name])
    wait_drax_ready(cluster, replica=leader)
    for name in names:
        kube.delete("Pod", name, "default", grace_period_seconds=0)
    wait_for("the pool's pods gone", lambda: not any(
        p["metadata"]["name"] in names for p in kube.list("Pod", "default")), timeout=120)
    return {"round": round_, "killed_replica": leader, "lease_duration_s": duration,
            "pods_after_kill": PODS - len(before), "lease_taken_s": round(lease_taken, 2),
            "first_bind_s": round(first_bind, 2), "all_bound_s": round(all_bound, 2)}


def requeue_round(kube: Kube, round_: int) -> dict[str, Any]:
    prefix = f"rq{round_}"
    objs = pool_objects(prefix=prefix, nodes=1, seed=round_)
    (node,) = (o for o in objs if o["kind"] == "Node")
    make_node_ready(kube, node["metadata"]["name"], labels=node["metadata"]["labels"])
    templates = add_templates(kube, prefix=prefix)
    name = f"{prefix}-waits"
    kube.create(pod(name, scheduler="drax", template=templates["1gpu"],
                    node_selector={"e2e/pool": prefix}))
    wait_for("the pod rejected", lambda: any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for c in kube.get("Pod", name, "default").get("status", {}).get("conditions", [])))
    time.sleep(WAIT_PARKED_SECONDS)
    published = time.monotonic()
    for obj in objs:
        if obj["kind"] == "ResourceSlice":
            obj["metadata"].pop("uid", None)
            kube.create(obj)
    wait_for("the pod bound", lambda: kube.get("Pod", name, "default")["spec"].get("nodeName"),
             timeout=400, interval=0.05)
    took = time.monotonic() - published
    conditions = kube.get("Pod", name, "default")["status"].get("conditions", [])
    return {"round": round_, "slice_to_bound_s": round(took, 2),
            "drax_condition": any(c["type"] == CONDITION for c in conditions)}


def run(rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drax-failover-") as tmp:
        cluster = start(Path(tmp), replicas=2)
        kube = cluster.kube()
        try:
            kube.apply_file(SAMPLE_CLASSES)
            add_pool(kube, prefix="fo", nodes=8, seed=5)
            templates = add_templates(kube, prefix="fo")
            failovers = [failover_round(cluster, kube, r, templates["1gpu"])
                         for r in range(rounds)]
            requeues = [requeue_round(kube, r) for r in range(rounds)]
        finally:
            kube.close()
            stop(cluster)
    return {"failover": failovers, "requeue": requeues}


def figures(raw: dict[str, Any], command: str) -> dict[str, Any]:
    fo, rq = raw["failover"], raw["requeue"]
    duration = fo[0]["lease_duration_s"]
    first = [r["first_bind_s"] for r in fo]
    slice_bound = [r["slice_to_bound_s"] for r in rq]
    # client-go's elector retries every RetryPeriod (2 s) with jitter 1.2: up to 4.4 s.
    goal_first = duration + 4.4 + 5.0
    return {
        "format": "figures", **provenance(command),
        "targets": [
            {"target": "failover: first bind after SIGKILL of the leader (worst round)",
             "goal": f"≤ {goal_first:.1f} s (lease {duration:.0f} s + retry 4.4 s + one cycle)",
             "measured": max(first), "unit": "s", "met": max(first) <= goal_first,
             "note": f"median {statistics.median(first):.1f} s over {len(first)} rounds"},
            {"target": "ResourceSlice published -> rejected pod bound (worst round)",
             "goal": "≤ 10 s, no deprecated flag", "measured": max(slice_bound), "unit": "s",
             "met": max(slice_bound) <= 10.0 and all(r["drax_condition"] for r in rq),
             "note": "drax.dev/DevicesChanged on the pod in every round"
             if all(r["drax_condition"] for r in rq) else "a round without drax's condition"},
        ],
        "tables": [
            {"caption": "Failover rounds (seconds after the SIGKILL)",
             "columns": ["round", "pods left", "lease taken", "first bind", "all bound"],
             "rows": [[r["round"], r["pods_after_kill"], r["lease_taken_s"], r["first_bind_s"],
                       r["all_bound_s"]] for r in fo]},
            {"caption": "Requeue rounds",
             "columns": ["round", "slice -> bound (s)", "drax condition"],
             "rows": [[r["round"], r["slice_to_bound_s"], r["drax_condition"]] for r in rq]},
        ],
        "notes": [
            f"leaseDurationSeconds {duration:.0f} (kube-scheduler's default); the standby "
            "takes over once the Lease it last saw renewed has expired on its clock, and "
            "polls every RetryPeriod (2 s, jittered up to 4.4 s).",
            "Without drax's status patch the rejected pod waits for kube-scheduler's flush of "
            "unschedulable pods: 302 s measured with the default 5 minutes, 35 s with the "
            "deprecated --pod-max-in-unschedulable-pods-duration=30s (docs/decisions.md); "
            "on this control plane it was not bound within 60 s without the patch.",
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.failover", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    command = f"python -m loadtest.failover --rounds {args.rounds}" + (
        f" --json {args.json}" if args.json else "")
    doc = figures(run(args.rounds), command)
    text = json.dumps(doc, indent=2) + "\n"
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
