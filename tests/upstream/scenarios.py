"""Random allocation scenarios for the differential tests against upstream's allocator.

One scenario is what the in-tree plugin hands `structured.Allocate` for one
pod on one node: Nodes, ResourceSlices, DeviceClasses, already-allocated
ResourceClaims, the pod's claims in order, the node and the feature gates.
Everything is raw API JSON (what both the Go oracle and drax's inventory
parse), generated from a `random.Random` so a failing seed replays exactly.

Sizes are kept small on purpose: a mismatch needs a few devices to show, and
small scenarios let CI run thousands of them; the shapes (several drivers,
pools over several slices and generations, network-attached slices, counters,
consumable capacity, taints, every attribute type, every request and
constraint kind, allocated claims, invalid and incomplete pools) are what the
generator spends its randomness on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

NODES = ("node-1", "node-2")
DRIVERS = ("gpu.example.com", "nic.example.com", "fpga.example.com")
ROOTS = ("pci-0", "pci-1", "pci-2")
MODELS = ("a100", "h100", "l4")
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"


@dataclass(slots=True)
class Scenario:
    seed: int
    objects: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    node: str
    features: dict[str, bool] = field(default_factory=dict)

    def request(self) -> dict[str, Any]:
        """The oracle's `allocate` line."""
        return {"op": "allocate", "objects": self.objects, "claims": self.claims,
                "node": self.node, "features": self.features}


def generate(seed: int, *, features: dict[str, bool]) -> Scenario:
    rng = random.Random(seed)
    gen = _Gen(rng)
    lists = rng.random() < 0.3
    feats = dict(features)
    feats["DRAListTypeAttributes"] = lists
    gen.lists = lists
    nodes = [{"apiVersion": "v1", "kind": "Node",
              "metadata": {"name": n, "labels": {"zone": z}}}
             for n, z in zip(NODES, ("zone-a", "zone-b"), strict=True)]
    slices = [s for driver in rng.sample(DRIVERS, rng.randint(1, 3))
              for _ in range(rng.randint(1, 2)) for s in gen.pool(driver)]
    classes = gen.classes()
    allocated = gen.allocated_claims(slices)
    claims = [gen.claim(f"claim-{i}") for i in range(rng.choice((1, 1, 2, 2, 3)))]
    return Scenario(seed=seed, objects=[*nodes, *slices, *classes, *allocated],
                    claims=claims, node="node-1", features=feats)


class _Gen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lists = False
        self.pools = 0
        self.slices = 0
        self.claims = 0
        self.zone: str | None = None  # one zone per network-attached pool

    # ------------------------------------------------------------------ slices

    def pool(self, driver: str) -> list[dict[str, Any]]:
        rng = self.rng
        self.pools += 1
        self.zone = None
        name = f"pool-{self.pools}"
        generation = rng.randint(1, 3)
        where = rng.choice(("local", "local", "local", "selector", "all", "other", "per-device"))
        n_slices = rng.choice((1, 1, 2, 3))
        counters = rng.random() < 0.3
        count = n_slices + (1 if counters else 0)
        if rng.random() < 0.05:
            count += 1  # incomplete: a slice is missing
        out = []
        devices_left = rng.randint(1, 6)
        names = [f"dev-{i}" for i in range(devices_left)]
        if rng.random() < 0.05 and len(names) > 1 and n_slices == 1 and where != "per-device":
            # invalid: duplicate device name (in one slice: drax judges names
            # over the whole pool, upstream over the slices a node sees)
            names[-1] = names[0]
        counter_sets = ["cs-0", "cs-1"] if counters else []
        per_slice = max(1, -(-len(names) // n_slices))
        for k in range(n_slices):
            chunk = names[k * per_slice:(k + 1) * per_slice]
            devices = [self.device(driver, d, where=where, counter_sets=counter_sets)
                       for d in chunk]
            out.append(self._slice(driver, name, generation, count, where, devices=devices))
        if counters:
            sets = [{"name": cs, "counters": {"mem": {"value": str(self.rng.choice((4, 8, 16)))},
                                              "slots": {"value": str(self.rng.randint(1, 4))}}}
                    for cs in counter_sets]
            if rng.random() < 0.05:
                sets[1]["name"] = "cs-0"  # invalid: duplicate counter set
            out.append(self._slice(driver, name, generation, count, where, counters=sets))
        if rng.random() < 0.2 and where != "per-device":
            # a stale slice of an older generation, reaching the same nodes as
            # the current ones (where it reaches a node they do not, upstream
            # still uses it: a documented deviation, docs/decisions.md)
            stale = [self.device(driver, "old-0", where=where, counter_sets=[])]
            out.append(self._slice(driver, name, generation - 1, count, where, devices=stale))
        return out

    def _slice(self, driver: str, pool: str, generation: int, count: int, where: str, *,
               devices: list[dict[str, Any]] | None = None,
               counters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        self.slices += 1
        if where == "selector" and self.zone is None:
            self.zone = self.rng.choice(("zone-a", "zone-b"))
        spec: dict[str, Any] = {"driver": driver, "pool": {
            "name": pool, "generation": generation, "resourceSliceCount": count}}
        if where == "local":
            spec["nodeName"] = "node-1"
        elif where == "other":
            spec["nodeName"] = "node-2"
        elif where == "all":
            spec["allNodes"] = True
        elif where == "selector":
            spec["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "zone", "operator": "In", "values": [self.zone]}]}]}
        else:
            spec["perDeviceNodeSelection"] = True
        if counters is not None:
            if where == "per-device":
                del spec["perDeviceNodeSelection"]
                spec["nodeName"] = "node-1"
            spec["sharedCounters"] = counters
        else:
            spec["devices"] = devices or []
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"slice-{self.slices:03d}"}, "spec": spec}

    def device(self, driver: str, name: str, *, where: str,
               counter_sets: list[str]) -> dict[str, Any]:
        rng = self.rng
        attrs: dict[str, Any] = {
            "model": {"string": rng.choice(MODELS)},
            "mem": {"int": rng.choice((8, 16, 40, 80))},
            "ok": {"bool": rng.random() < 0.8},
            "ver": {"version": rng.choice(("1.0.0", "1.2.3", "2.0.0-rc.1"))},
            PCIE_ROOT: {"string": rng.choice(ROOTS)},
        }
        if self.lists and rng.random() < 0.5:
            attrs["roots"] = {"strings": rng.sample(ROOTS, rng.randint(1, 2))}
            attrs["ids"] = {"ints": rng.sample(range(4), rng.randint(1, 3))}
        if rng.random() < 0.2:
            del attrs["model"]
        out: dict[str, Any] = {"name": name, "attributes": attrs}
        multi = rng.random() < 0.2
        if multi:
            out["allowMultipleAllocations"] = True
            out["capacity"] = {"bw": self._consumable()}
        elif rng.random() < 0.5:
            out["capacity"] = {"memory": {"value": f"{rng.choice((8, 16, 40))}Gi"}}
        if counter_sets and rng.random() < 0.8:
            out["consumesCounters"] = [{"counterSet": rng.choice(counter_sets), "counters": {
                "mem": {"value": str(rng.choice((2, 4, 8)))}}}]
            if rng.random() < 0.03:
                out["consumesCounters"][0]["counterSet"] = "cs-9"  # invalid: unknown set
        if rng.random() < 0.15:
            out["taints"] = [{"key": rng.choice(("broken", "maint")),
                              "value": rng.choice(("", "yes")),
                              "effect": rng.choice(("NoSchedule", "NoExecute", "None"))}]
        if where == "per-device":
            choice = rng.choice(("node", "other", "all", "selector"))
            if choice == "node":
                out["nodeName"] = "node-1"
            elif choice == "other":
                out["nodeName"] = "node-2"
            elif choice == "all":
                out["allNodes"] = True
            else:
                out["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["zone-a"]}]}]}
        return out

    def _consumable(self) -> dict[str, Any]:
        rng = self.rng
        cap: dict[str, Any] = {"value": str(rng.choice((10, 20, 100)))}
        kind = rng.choice(("none", "range", "values", "default"))
        if kind == "range":
            cap["requestPolicy"] = {"default": "5", "validRange": {
                "min": "5", "max": "50", "step": "5"}}
        elif kind == "values":
            cap["requestPolicy"] = {"default": "10", "validValues": ["10", "20"]}
        elif kind == "default":
            cap["requestPolicy"] = {"default": "4"}
        return cap

    # ------------------------------------------------------------------ classes

    def classes(self) -> list[dict[str, Any]]:
        def cls(name: str, *selectors: str) -> dict[str, Any]:
            return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": name},
                    "spec": {"selectors": [{"cel": {"expression": s}} for s in selectors]}}
        big = "device.attributes['gpu.example.com'].mem >= 40"
        out = [cls("any"), cls("big", big if self.rng.random() < 0.2
                               else f'device.driver == "gpu.example.com" && {big}')]
        out += [cls(d.split(".")[0], f'device.driver == "{d}"') for d in DRIVERS]
        return out

    # ------------------------------------------------------------------ claims

    def claim(self, name: str) -> dict[str, Any]:
        rng = self.rng
        requests = [self.request(f"r{i}") for i in range(rng.choice((1, 1, 2, 3)))]
        devices: dict[str, Any] = {"requests": requests}
        if rng.random() < 0.35:
            attribute = rng.choice(("model", "mem", PCIE_ROOT, "ver", "roots" if self.lists
                                    else "ok"))
            qualified = attribute if "/" in attribute else f"gpu.example.com/{attribute}"
            kind = rng.choice(("matchAttribute", "distinctAttribute"))
            constraint: dict[str, Any] = {kind: qualified}
            if len(requests) > 1 and rng.random() < 0.5:
                constraint["requests"] = [r["name"] for r in rng.sample(requests, 2)]
            devices["constraints"] = [constraint]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                "spec": {"devices": devices}}

    def request(self, name: str) -> dict[str, Any]:
        if self.rng.random() < 0.3:
            subs = [{"name": f"s{i}", **self.exact()} for i in range(self.rng.randint(2, 3))]
            return {"name": name, "firstAvailable": subs}
        return {"name": name, "exactly": self.exact()}

    def exact(self) -> dict[str, Any]:
        rng = self.rng
        device_class = rng.choice(("any", "gpu", "gpu", "nic", "fpga", "big"))
        out: dict[str, Any] = {"deviceClassName": device_class}
        if rng.random() < 0.15:
            out["allocationMode"] = "All"
        else:
            # written out: the API server defaults it, the allocator does not
            out["allocationMode"] = "ExactCount"
            out["count"] = rng.choice((1, 1, 1, 2, 2, 3))
        selectors = []
        if rng.random() < 0.4:
            # mostly guarded by the driver: an unguarded one errors at runtime
            # on other drivers' devices, which upstream reports as an error
            guard = 'device.driver == "gpu.example.com" && ' if rng.random() < 0.8 else ""
            selectors.append(guard + rng.choice((
                'device.attributes["gpu.example.com"].model == "h100"',
                "device.attributes['gpu.example.com'].ok",
                'device.attributes["resource.kubernetes.io"].pcieRoot == "pci-2"',
                "device.attributes['gpu.example.com'].mem > 16",
                'device.attributes["gpu.example.com"].ver.isGreaterThan(semver("1.1.0"))',
                '"model" in device.attributes[device.driver]',
                "device.capacity[device.driver].memory.compareTo(quantity('16Gi')) >= 0",
                'device.attributes["gpu.example.com"].model.startsWith("a")',
            )))
        if self.lists and rng.random() < 0.2:
            selectors.append("'pci-1' in device.attributes[device.driver].roots")
        if selectors:
            out["selectors"] = [{"cel": {"expression": s}} for s in selectors]
        if rng.random() < 0.07:
            out["adminAccess"] = True
        if rng.random() < 0.2:
            out["tolerations"] = [rng.choice((
                {"key": "broken", "operator": "Exists"},
                {"key": "maint", "operator": "Equal", "value": "yes", "effect": "NoSchedule"},
                {"key": "broken", "operator": "Equal", "value": "", "effect": "NoExecute"},
                {"operator": "Exists"}))]
        if rng.random() < 0.15:
            out["capacity"] = {"requests": {"bw": str(rng.choice((3, 5, 10, 15)))}}
        return out

    def allocated_claims(self, slices: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rng = self.rng
        devices = [(s["spec"]["driver"], s["spec"]["pool"]["name"], d)
                   for s in slices for d in s["spec"].get("devices", [])]
        out = []
        for i in range(rng.choice((0, 0, 1, 2))):
            if not devices:
                break
            results = []
            for driver, pool, device in rng.sample(devices, min(len(devices),
                                                                rng.randint(1, 2))):
                result: dict[str, Any] = {"request": "r", "driver": driver, "pool": pool,
                                          "device": device["name"]}
                if device.get("allowMultipleAllocations"):
                    result["shareID"] = f"00000000-0000-0000-0000-00000000000{i}"
                    result["consumedCapacity"] = {"bw": str(rng.choice((5, 10)))}
                elif rng.random() < 0.1:
                    result["adminAccess"] = True
                results.append(result)
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"held-{i}", "namespace": "default",
                                     "uid": f"uid-held-{i}"},
                        "spec": {"devices": {"requests": [
                            {"name": "r", "exactly": {"deviceClassName": "any"}}]}},
                        "status": {"allocation": {"devices": {"results": results}}}})
        return out
