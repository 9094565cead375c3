"""`drax simulate`: replay a workload through filter → prioritize → bind, pod by pod.

Every pod goes through the same `Extender` the HTTP server uses, with the
file-mode binder, so what is measured here is what a scheduler running drax
would do. Three policies make one run comparable with the others:
- `drax`: allocator mode; the node with the highest priority (ties broken at
  random with the seed, as kube-scheduler's selectHost does), drax's allocation;
- `advisor`: the same node choice, but the allocation upstream would pick;
- `first-fit`: upstream without drax: a feasible node at random (seeded), the
  first fit in slice order.

Besides the placements, the run reports alignment (pods whose devices share
one PCIe root / one NUMA node, and how many could have: the best tier drax's
search finds on any feasible node), GPUs without a same-root NIC of their pod,
and free devices stranded without a local partner.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final, TextIO

from app.allocator.types import ClaimAllocation
from app.cli.common import (
    InputError,
    add_config_argument,
    add_feature_gates_argument,
    add_objects_argument,
    add_output_argument,
    command,
    command_settings,
    inventory_from,
    parse_sourced,
    read_objects,
    served_nodes,
    source_of,
    write_output,
)
from app.config import Settings
from app.extender import Extender, NodeEvaluation
from app.features import FeatureGates
from app.inventory import Inventory
from app.model import Pod
from app.runtime import topology_config
from app.topology import TopologyConfig, explain, node_topology
from app.topology.plot import NodeRow, node_cells, render_png

POLICIES: Final = ("drax", "advisor", "first-fit")
EXIT_IO: Final = 1
_TIER_NAMES: Final = ("span", "numa", "root")
_REASONS_SHOWN: Final = 3


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulate", help="replay a workload of pods through filter, prioritize and bind",
        description="Load a cluster (--objects) and replay the pods of --workload in order "
                    "through the scheduler's path (filter, prioritize, pick the best node, "
                    "bind), then report where each pod went and how well its devices are "
                    "aligned.")
    add_objects_argument(parser, required=False,
                         help="YAML/JSON files or folders with the cluster's objects "
                              "(default: the settings' inventory)")
    parser.add_argument("--workload", required=True, metavar="FILE",
                        help="YAML/JSON list of Pods, in order, with the ResourceClaims or "
                             "ResourceClaimTemplates they use")
    parser.add_argument("--policy", choices=POLICIES, default="drax",
                        help="drax: best allocation on the best node; advisor: upstream's "
                             "allocation on drax's best node; first-fit: upstream alone")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="random seed for tie-breaks and first-fit's node choice")
    parser.add_argument("--packing", choices=("binpack", "spread"), default=None,
                        help="packing policy, as topology.packing sets it for serve "
                             "(default: the settings' topology.packing, binpack)")
    add_feature_gates_argument(parser)
    add_config_argument(parser)
    add_output_argument(parser)
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw each node's devices, grouped by NUMA node and PCIe root, "
                             "coloured by the pod holding them (one row per node)")
    parser.set_defaults(func=run)


@dataclass(slots=True)
class _Alignment:
    """Alignment facts of one placed pod."""

    placed: int = 0  # devices with a topology
    tier: int | None = None
    best_tier: int | None = None  # best tier drax's search finds on any feasible node
    accelerators: int = 0  # accelerators of a pod that also got NICs
    unpaired: int = 0


@dataclass(slots=True)
class _PodResult:
    pod: str
    node: str | None = None
    claims: list[dict[str, Any]] = field(default_factory=list)
    reason: str | None = None
    alignment: _Alignment = field(default_factory=_Alignment)

    def to_dict(self) -> dict[str, Any]:
        return {"pod": self.pod, "node": self.node, "claims": self.claims,
                "reason": self.reason}


@command("simulate")
def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    inventory, pods, settings, config = _load(args)
    simulation = Simulation(inventory, features=settings.features, config=config,
                            policy=args.policy, seed=args.seed,
                            nodes=served_nodes(inventory, settings))
    results = asyncio.run(simulation.run(pods))
    report = simulation.report(results)
    write_output(out, args.output, document=report, table=lambda: render_table(report, results))
    if args.plot:
        try:
            Path(args.plot).write_bytes(simulation.plot(results))
        except OSError as exc:
            print(f"drax simulate: cannot write {args.plot}: {exc.strerror or exc}", file=err)
            return EXIT_IO
    return 0


def _load(args: argparse.Namespace) -> tuple[Inventory, list[Pod], Settings, TopologyConfig]:
    settings = command_settings(args, ("feature_gates",))
    config = topology_config(settings)
    if args.packing is not None:
        config = replace(config, packing=args.packing)
    cluster = read_objects(source_of(args, settings).paths)
    workload = read_objects([args.workload])
    inventory = inventory_from([*cluster, *(o for o in workload if o.obj.get("kind") != "Pod")])
    pods: list[Pod] = [parse_sourced("Pod", o) for o in workload if o.obj.get("kind") == "Pod"]
    if not pods:
        raise InputError(f"{args.workload}: no Pods to replay")
    return inventory, pods, settings, config


class Simulation:
    """One replay; `run` places the pods, `report` summarises (see module doc)."""

    def __init__(self, inventory: Inventory, *, features: FeatureGates,
                 config: TopologyConfig, policy: str, seed: int,
                 nodes: Sequence[str] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
        self._inventory = inventory
        # The nodes drax serves (a node pool's); None: every node known.
        self._nodes = None if nodes is None else list(nodes)
        self._config = config
        self._policy = policy
        self._seed = seed
        self._rng = random.Random(seed)
        mode = "allocator" if policy == "drax" else "advisor"
        self._extender = Extender(inventory, features=features, mode=mode,
                                  topology_config=config, file_mode=True)
        # What drax's search could reach on the feasible nodes, for every policy.
        self._oracle = self._extender if mode == "allocator" else Extender(
            inventory, features=features, mode="allocator", topology_config=config,
            file_mode=True)
        self.stranded_at_first_failure: dict[str, int] | None = None

    async def run(self, pods: Sequence[Pod]) -> list[_PodResult]:
        results = []
        for pod in pods:
            self._inventory.upsert("Pod", pod)
            result = await self._place(pod)
            if result.node is None and self.stranded_at_first_failure is None:
                self.stranded_at_first_failure = self.stranded()
            results.append(result)
        return results

    async def _place(self, pod: Pod) -> _PodResult:
        result = _PodResult(pod=pod.key)
        nodes = self.node_names()
        verdict = self._extender.filter(pod, nodes)
        if not verdict.passed:
            result.reason = verdict.error or _unschedulable(len(nodes), verdict.failed,
                                                           verdict.unresolvable)
            return result
        node = self._choose(pod, verdict.passed)
        chosen = self._extender.evaluate(pod, [node])[0]
        alignment = self._alignment(node, chosen.claims)
        alignment.best_tier = max(
            (t for ev in self._oracle.evaluate(pod, verdict.passed) if ev.feasible
             for t in [self._alignment(ev.node, ev.claims).tier] if t is not None),
            default=None)
        error = await self._extender.bind(namespace=pod.namespace, name=pod.name, uid=pod.uid,
                                          node=node)
        if error is not None:
            result.reason = f"bind to {node} failed: {error.message}"
            return result
        result.node = node
        result.alignment = alignment
        result.claims = self._written_claims(node, chosen.claims)
        return result

    def node_names(self) -> list[str]:
        return self._inventory.node_names() if self._nodes is None else self._nodes

    def _choose(self, pod: Pod, passed: Sequence[str]) -> str:
        if self._policy == "first-fit":
            return self._rng.choice(list(passed))
        # prioritize leaves out nodes scoring 0, as kube-scheduler reads them
        scores = dict(self._extender.prioritize(pod, passed))
        best = max(scores.get(name, 0) for name in passed)
        return self._rng.choice([name for name in passed if scores.get(name, 0) == best])

    def _written_claims(self, node: str, planned: Sequence[ClaimAllocation]
                        ) -> list[dict[str, Any]]:
        """The allocations bind wrote, shaped as `drax allocate` reports claims."""
        written = []
        for ca in planned:
            claim = self._inventory.claim(ca.claim_key)
            allocation = claim.allocation if claim is not None else None
            written.append(ClaimAllocation(claim_key=ca.claim_key,
                                           allocation=allocation or ca.allocation))
        return NodeEvaluation(node=node, feasible=True, claims=tuple(written)).to_dict()["claims"]

    def _alignment(self, node: str, claims: Sequence[ClaimAllocation]) -> _Alignment:
        state = self._inventory.node_state(node)
        if state is None:
            return _Alignment()
        topology = explain(claims, node_view=state.view, allocated=state.allocated,
                           config=self._config)
        return _Alignment(placed=topology.placed,
                          tier=topology.quality.tier if topology.placed else None,
                          accelerators=topology.accelerators, unpaired=topology.unpaired)

    def stranded(self) -> dict[str, int]:
        """Free devices without a local partner, on nodes still in play.

        On a node with a free GPU, a free GPU whose PCIe root has no free NIC,
        or a free NIC whose root has no free GPU, can no longer be part of an
        aligned GPU+NIC allocation: placement stranded it. NICs left on nodes
        whose GPUs are all taken are reported apart (`nicsOnFullNodes`): that
        is the workload needing fewer NICs than the nodes carry, whatever the
        placement. Counted in units (a partitionable GPU is one GPU, free only
        while none of its partitions is taken); only roots holding both kinds.
        """
        out = {"gpus": 0, "nics": 0, "total": 0, "nicsOnFullNodes": 0}
        for name in self.node_names():
            state = self._inventory.node_state(name)
            if state is None:
                continue
            topology = node_topology(state.view, self._config)
            taken = state.allocated.devices | state.allocated.multi_allocated
            node_gpus = node_nics = node_free_gpus = 0
            for units in topology.roots.values():
                members = [topology.units[u] for u in units]
                is_gpu = [any(d in topology.accelerators for d in m) for m in members]
                is_nic = [any(d in topology.nics for d in m) for m in members]
                if not (any(is_gpu) and any(is_nic)):
                    continue
                free = [not any(d in taken for d in m) for m in members]
                free_gpus = sum(1 for f, g in zip(free, is_gpu, strict=True) if f and g)
                free_nics = sum(1 for f, n in zip(free, is_nic, strict=True) if f and n)
                node_free_gpus += free_gpus
                node_gpus += free_gpus if not free_nics else 0
                node_nics += free_nics if not free_gpus else 0
            if node_free_gpus:
                out["gpus"] += node_gpus
                out["nics"] += node_nics
            else:
                out["nicsOnFullNodes"] += node_nics
        out["total"] = out["gpus"] + out["nics"]
        return out

    def plot(self, results: Sequence[_PodResult]) -> bytes:
        """PNG of every node's devices coloured by holder (see app.topology.plot)."""
        holders = {f"{r['driver']}/{r['pool']}/{r['device']}": result.pod
                   for result in results for c in result.claims for r in c["results"]}
        rows = []
        for name in self.node_names():
            state = self._inventory.node_state(name)
            if state is not None:
                rows.append(NodeRow(name, node_cells(node_topology(state.view, self._config),
                                                     holders)))
        placed = sum(1 for r in results if r.node is not None)
        title = (f"drax simulate, policy {self._policy}, seed {self._seed}: {placed} of "
                 f"{len(results)} pods placed on {len(rows)} nodes")
        return render_png(rows, title=title)

    def report(self, results: Sequence[_PodResult]) -> dict[str, Any]:
        placed = [r for r in results if r.node is not None]
        first_failure = next((i for i, r in enumerate(results) if r.node is None), None)
        return {
            "policy": self._policy,
            "placed": len(placed),
            "unschedulable": len(results) - len(placed),
            "firstFailure": first_failure,
            "pods": [r.to_dict() for r in results],
            "summary": self._summary(results, placed, first_failure),
        }

    def _summary(self, results: Sequence[_PodResult], placed: Sequence[_PodResult],
                 first_failure: int | None) -> dict[str, Any]:
        multi = [r.alignment for r in placed if r.alignment.placed >= 2]
        one_root = sum(1 for a in multi if a.tier == 2)
        one_numa = sum(1 for a in multi if a.tier is not None and a.tier >= 1)
        root_possible = [a for a in multi if a.best_tier == 2]
        numa_possible = [a for a in multi if a.best_tier is not None and a.best_tier >= 1]
        return {
            "pods": len(results),
            "placedBeforeFirstFailure": len(results) if first_failure is None else sum(
                1 for r in results[:first_failure] if r.node is not None),
            "multiDevicePods": len(multi),
            "oneRootShare": _share(one_root, len(multi)),
            "oneNumaShare": _share(one_numa, len(multi)),
            "oneRootPossible": len(root_possible),
            "oneRootMissed": sum(1 for a in root_possible if a.tier != 2),
            "oneNumaPossible": len(numa_possible),
            "oneNumaMissed": sum(1 for a in numa_possible if a.tier is None or a.tier < 1),
            "gpusInNicPods": sum(r.alignment.accelerators for r in placed),
            "gpusWithoutSameRootNic": sum(r.alignment.unpaired for r in placed),
            "strandedDevices": self.stranded(),
            "strandedAtFirstFailure": self.stranded_at_first_failure,
        }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _unschedulable(total: int, failed: dict[str, str], unresolvable: dict[str, str]) -> str:
    """kube-scheduler's summary form: `0/N nodes are available: 3 <reason>, ...`."""
    counts = Counter([*failed.values(), *unresolvable.values()])
    parts = [f"{n} {reason}" for reason, n in counts.most_common(_REASONS_SHOWN)]
    if len(counts) > _REASONS_SHOWN:
        parts.append(f"{len(counts) - _REASONS_SHOWN} other reason(s)")
    return f"0/{total} nodes are available: " + "; ".join(parts)


def _plain(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(f"{k}={v}" for k, v in value.items())
    return "-" if value is None else str(value)


def render_table(report: dict[str, Any], results: Sequence[_PodResult]) -> str:
    rows = [("POD", "NODE", "TOPOLOGY", "DEVICES / REASON")]
    for r in results:
        if r.node is None:
            rows.append((r.pod, "-", "-", r.reason or ""))
            continue
        tier = "-" if r.alignment.tier is None else _TIER_NAMES[r.alignment.tier]
        if r.alignment.unpaired:
            tier += f" ({r.alignment.unpaired} GPU w/o NIC)"
        devices = ", ".join(res["device"] for c in r.claims for res in c["results"])
        rows.append((r.pod, r.node, tier, devices))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True))
             + "  " + row[3] for row in rows]
    summary = report["summary"]
    lines.append("")
    lines.append(f"policy {report['policy']}: {report['placed']} placed, "
                 f"{report['unschedulable']} unschedulable, first failure at "
                 f"{report['firstFailure'] if report['firstFailure'] is not None else '-'}")
    lines.extend(f"  {key}: {_plain(value)}" for key, value in summary.items())
    return "\n".join(lines) + "\n"
