"""Churn: inventory events applied while pods are being scheduled, in-process.

The HTTP server has no event endpoint (events come from the kube watch), so this
benchmark drives `app.inventory.Inventory` and `app.extender.Extender`
directly, the way the kube source and the HTTP edge do. Between scheduling
cycles (filter + prioritize + bind of one pod over the scheduler's default
share of candidate nodes) it applies watch events, round-robin:

- `slice-remove-device`: a node's single-slice GPU or NIC pool is republished
  without one device (generation + 1);
- `slice-restore-device`: an earlier removal is undone (generation + 1);
- `claim-release`: a bound pod is deleted together with its ResourceClaim,
  which frees its devices;
- `node-update`: a Node's labels change.

Each `Inventory.apply` call (parsing included: a watch hands over raw objects)
is timed. Correctness is checked as it goes, through the extender itself:
a removed device is never in any allocation, an exclusive device is never held
by two claims, and right after a release, the same claim shape fits on that
node again (probed with a fresh template pod).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import itertools
import random
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from app.extender.verbs import Extender
from app.features import FeatureGates
from app.inventory import KINDS, Inventory
from app.model import Pod, parse_object
from loadtest import bench, generator
from loadtest.stats import summarize

EVENT_KINDS: Final = ("slice-remove-device", "slice-restore-device", "claim-release",
                      "node-update")
TIME_LIMIT_SECONDS: Final = 90.0


@dataclass(slots=True)
class _Bound:
    pod: dict[str, Any]
    claim: dict[str, Any]
    shape: str
    node: str
    devices: tuple[str, ...]


@dataclass(slots=True)
class _State:
    inventory: Inventory
    extender: Extender
    runner: asyncio.Runner
    slices: dict[str, dict[str, Any]]  # slice name -> current raw object
    nodes: dict[str, dict[str, Any]]
    removed: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)  # id -> slice
    holders: dict[str, str] = field(default_factory=dict)  # exclusive device id -> claim key
    bound: list[_Bound] = field(default_factory=list)
    shared_devices: set[str] = field(default_factory=set)
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    # CPU time of the same calls: on a shared machine, wall-clock tails include
    # time the process was preempted by others.
    cpu_times: list[float] = field(default_factory=list)
    cycles: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    checks: int = 0
    probes: itertools.count = field(default_factory=itertools.count)

    def apply(self, kind: str, event_type: str, obj: Mapping[str, Any], label: str) -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        self.inventory.apply(kind, event_type, obj)
        self.times[label].append(time.perf_counter() - start)
        self.cpu_times.append(time.thread_time() - cpu)


def _build(cluster: Sequence[dict[str, Any]], claims: Sequence[dict[str, Any]],
           runner: asyncio.Runner) -> _State:
    inventory = Inventory()
    # The initial list: millions of long-lived objects the collector need not scan.
    gc.disable()
    try:
        for obj in [*cluster, *claims]:
            inventory.apply(obj["kind"], "ADDED", obj)
    finally:
        gc.enable()
    for kind in KINDS:
        inventory.mark_synced(kind)
    extender = Extender(inventory, features=FeatureGates(), file_mode=True)
    state = _State(inventory=inventory, extender=extender, runner=runner,
                   slices={o["metadata"]["name"]: o for o in cluster
                           if o["kind"] == "ResourceSlice"},
                   nodes={o["metadata"]["name"]: o for o in cluster if o["kind"] == "Node"})
    for s in state.slices.values():
        for d in s["spec"].get("devices", ()):
            if d.get("allowMultipleAllocations"):
                state.shared_devices.add(f"{s['spec']['driver']}/{s['spec']['pool']['name']}/"
                                         f"{d['name']}")
    return state


@contextmanager
def _serving_gc() -> Iterator[None]:
    """The collector as `drax serve` leaves it after loading (the inventory frozen
    out of the generations, so collections do not rescan it), undone afterwards."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _parse_pod(raw: Mapping[str, Any]) -> Pod:
    pod: Pod = parse_object("Pod", raw)
    return pod


def _allocated_devices(state: _State, claim_key: str) -> tuple[str, ...]:
    claim = state.inventory.claim(claim_key)
    if claim is None or claim.allocation is None:
        return ()
    return tuple(r.device_id for r in claim.allocation.results)


def _check_devices(state: _State, claim_key: str, devices: Sequence[str]) -> None:
    state.checks += 1
    for device in devices:
        if device in state.removed:
            state.violations.append(f"{claim_key} got removed device {device}")
        if device in state.shared_devices:
            continue
        holder = state.holders.get(device)
        if holder is not None and holder != claim_key:
            state.violations.append(f"{device} held by {holder} and {claim_key}")
        state.holders[device] = claim_key


def _schedule(state: _State, pod: dict[str, Any], claim: dict[str, Any], shape: str,
              candidates: list[str]) -> None:
    parsed = _parse_pod(pod)
    start = time.perf_counter()
    result = state.extender.filter(parsed, candidates)
    passed = result.passed
    node = passed[0] if passed else None
    if len(passed) > 1:
        # A node left out of the answer scores 0, as in kube-scheduler.
        scores = dict(state.extender.prioritize(parsed, passed))
        top = max(scores.values(), default=0)
        node = next(name for name in passed if scores.get(name, 0) == top)
    state.cycles.append(time.perf_counter() - start)
    if node is None:
        return
    meta = pod["metadata"]
    error = state.runner.run(state.extender.bind(namespace=meta["namespace"], name=meta["name"],
                                            uid=meta["uid"], node=node))
    if error is not None:
        state.violations.append(f"bind {meta['name']} on {node}: {error.message}")
        return
    key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
    devices = _allocated_devices(state, key)
    _check_devices(state, key, devices)
    state.bound.append(_Bound(pod=pod, claim=claim, shape=shape, node=node, devices=devices))


def _single_slice_pools(state: _State) -> list[str]:
    return sorted(name for name, s in state.slices.items()
                  if s["spec"]["pool"]["resourceSliceCount"] == 1 and s["spec"].get("devices"))


def _remove_device(state: _State, rng: random.Random, pools: list[str]) -> None:
    name = rng.choice(pools)
    current = state.slices[name]
    devices = current["spec"]["devices"]
    if len(devices) < 2:
        return
    victim = rng.choice(devices)
    updated = copy.deepcopy(current)
    updated["spec"]["devices"] = [d for d in devices if d["name"] != victim["name"]]
    updated["spec"]["pool"]["generation"] += 1
    state.apply("ResourceSlice", "MODIFIED", updated, "slice-remove-device")
    state.slices[name] = updated
    spec = updated["spec"]
    device_id = f"{spec['driver']}/{spec['pool']['name']}/{victim['name']}"
    state.removed[device_id] = (name, victim)
    # A removed device is not allocatable, even when a probe would fit on it.
    node = spec["nodeName"]
    probe_shape = "1gpu" if spec["driver"] == generator.GPU_DRIVER else "2gpu-1nic-same-root"
    for ev in state.extender.evaluate(_probe_pod(state, probe_shape), [node]):
        state.checks += 1
        for ca in ev.claims:
            for r in ca.allocation.results:
                if r.device_id == device_id:
                    state.violations.append(f"removed {device_id} offered on {node}")


def _restore_device(state: _State, rng: random.Random) -> None:
    if not state.removed:
        return
    device_id = rng.choice(sorted(state.removed))
    name, victim = state.removed.pop(device_id)
    updated = copy.deepcopy(state.slices[name])
    updated["spec"]["devices"].append(victim)
    updated["spec"]["pool"]["generation"] += 1
    state.apply("ResourceSlice", "MODIFIED", updated, "slice-restore-device")
    state.slices[name] = updated


def _release(state: _State, rng: random.Random) -> None:
    if not state.bound:
        return
    done = state.bound.pop(rng.randrange(len(state.bound)))
    state.apply("Pod", "DELETED", done.pod, "claim-release")
    state.apply("ResourceClaim", "DELETED", done.claim, "claim-release")
    key = f"{done.claim['metadata']['namespace']}/{done.claim['metadata']['name']}"
    for device in done.devices:
        if state.holders.get(device) == key:
            del state.holders[device]
    if any(d in state.removed for d in done.devices):
        return
    # The claim fitted on this node with these devices; freed, they fit again.
    state.checks += 1
    (ev,) = state.extender.evaluate(_probe_pod(state, done.shape), [done.node])
    if not ev.feasible:
        state.violations.append(f"after releasing {key}, {done.shape} no longer fits on "
                                f"{done.node}: {ev.reason or ev.error}")


def _update_node(state: _State, rng: random.Random) -> None:
    name = rng.choice(sorted(state.nodes))
    updated = copy.deepcopy(state.nodes[name])
    labels = updated["metadata"]["labels"]
    labels["loadtest.drax.dev/churn"] = str(int(labels.get("loadtest.drax.dev/churn", "0")) + 1)
    state.apply("Node", "MODIFIED", updated, "node-update")
    state.nodes[name] = updated


def _probe_pod(state: _State, shape: str) -> Pod:
    n = next(state.probes)
    return _parse_pod({
        "metadata": {"name": f"probe-{n}", "namespace": "default", "uid": f"probe-uid-{n}"},
        "spec": {"resourceClaims": [{"name": generator.POD_CLAIM_NAME,
                                     "resourceClaimTemplateName":
                                         generator.template_name(shape)}]}})


def run_churn(*, nodes: int, seed: int = 0, events: int = 2000, pods: int = 0) -> dict[str, Any]:
    """Build an inventory of `nodes`, then interleave `events` events with
    scheduling cycles (`pods`, default events / 2); bounded by TIME_LIMIT_SECONDS."""
    pods = pods or max(1, events // 2)
    gc.disable()
    try:
        cluster = generator.generate_cluster(nodes=nodes, seed=seed)
        workload = generator.generate_workload(pods=pods, seed=seed, claims="claim")
    finally:
        gc.enable()
    templates = [generator.claim_template(s) for s in generator.SHAPES]
    claims = [o for o in workload if o["kind"] == "ResourceClaim"]
    pod_objs = [o for o in workload if o["kind"] == "Pod"]
    shapes = generator.workload_shapes(pods=pods, seed=seed)
    with asyncio.Runner() as runner:
        state = _build(cluster, [*templates, *claims], runner)
        del cluster
        with _serving_gc():
            _drive(state, random.Random(seed),
                   pods=list(zip(pod_objs, claims, shapes, strict=True)), events=events)
    all_times = [t for ts in state.times.values() for t in ts]
    return {
        "events": len(all_times), "cycles": len(state.cycles),
        "candidates": bench.scheduler_candidate_count(nodes),
        "apply": summarize(all_times).to_dict(),
        "apply_cpu": summarize(state.cpu_times).to_dict(),
        "by_kind": {k: summarize(state.times[k]).to_dict() for k in EVENT_KINDS
                    if state.times.get(k)},
        "cycle_in_process": summarize(state.cycles).to_dict(),
        "checks_passed": state.checks - len(state.violations),
        "violations": state.violations,
    }


def _drive(state: _State, rng: random.Random, *,
           pods: Sequence[tuple[dict[str, Any], dict[str, Any], str]], events: int) -> None:
    pools = _single_slice_pools(state)
    candidates = bench.candidate_lists(state.inventory.node_names(), mode="scheduler")
    actions = {
        "slice-remove-device": lambda: _remove_device(state, rng, pools),
        "slice-restore-device": lambda: _restore_device(state, rng),
        "claim-release": lambda: _release(state, rng),
        "node-update": lambda: _update_node(state, rng),
    }
    per_pod = max(1, round(events / len(pods)))
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    kinds = itertools.cycle(EVENT_KINDS)
    for pod, claim, shape in pods:
        if sum(map(len, state.times.values())) >= events or time.monotonic() > deadline:
            return
        _schedule(state, pod, claim, shape, candidates())
        for _ in range(per_pod):
            actions[next(kinds)]()
