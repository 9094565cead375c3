"""A pod drax rejected for want of devices is bound soon after a driver publishes them.

The drax kube-scheduler runs with manifests/deployment.yaml's flags, which no
longer carry the deprecated `--pod-max-in-unschedulable-pods-duration`: no
ResourceSlice event requeues a pod an extender rejected (1.37.2), so it would
wait for the 5-minute flush. drax touches the status of the pods it rejected
(condition drax.dev/DevicesChanged) when slices appear, and the pod's own update
moves it back to the queue.
"""

from __future__ import annotations

import time

from app.binder.requeue import CONDITION
from tests.e2e.cluster import make_node_ready
from tests.e2e.kube import Kube, wait_for
from tests.e2e.workload import add_templates, check_workload, pod, pool_objects, wait_bound

POOL = "rq"
# kube-scheduler's pod backoff tops out at 10 s; drax gathers slice events for
# 0.2 s and patches once a second at most. Far below the 5-minute flush.
BOUND_WITHIN = 30.0


def test_a_rejected_pod_is_bound_once_its_devices_appear(kube: Kube) -> None:
    objs = pool_objects(prefix=POOL, nodes=1, seed=3)
    (node,) = (o for o in objs if o["kind"] == "Node")
    node_name = node["metadata"]["name"]
    make_node_ready(kube, node_name, labels=node["metadata"]["labels"])  # no devices yet
    templates = add_templates(kube, prefix=POOL)
    kube.create(pod(f"{POOL}-waits", scheduler="drax", template=templates["1gpu"],
                    node_selector={"e2e/pool": POOL}))

    def rejected() -> bool:
        conditions = kube.get("Pod", f"{POOL}-waits", "default").get("status", {}).get(
            "conditions", [])
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    wait_for("the pod rejected by drax", rejected)
    # Past the retry the scheduler's own status write causes: the pod sits among
    # the unschedulable ones, where only an event moves it.
    time.sleep(8)
    published = time.monotonic()
    for obj in objs:
        if obj["kind"] == "ResourceSlice":
            obj["metadata"].pop("uid", None)
            kube.create(obj)
    bound = wait_bound(kube, [f"{POOL}-waits"], timeout=BOUND_WITHIN)
    took = time.monotonic() - published
    print(f"\nslice published -> waiting pod bound: {took:.1f} s")
    check_workload(kube, bound, nodes=[node_name])
    conditions = bound[f"{POOL}-waits"]["status"].get("conditions", [])
    assert any(c["type"] == CONDITION and c["status"] == "True" for c in conditions), conditions
