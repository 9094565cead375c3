"""`drax allocate`: would this pod's claims fit, node by node, and with which devices.

Loads objects from files into a file-mode inventory and asks the same
`Extender.evaluate` that filter uses, so the answer is the one the scheduler
would get. JSON (the default when stdout is not a terminal) is for scripts;
the table is for people.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from app.cli.common import (
    InputError,
    add_config_argument,
    add_feature_gates_argument,
    add_objects_argument,
    add_output_argument,
    command,
    command_settings,
    namespaced_key,
    served_nodes,
    source_of,
    write_output,
)
from app.config import MODES
from app.extender import Extender, NodeEvaluation
from app.inventory import Inventory
from app.runtime import topology_config
from app.topology import AllocationTopology, TopologyConfig, explain


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "allocate", help="show whether and how a pod's claims can be allocated on each node",
        description="Load Nodes, DeviceClasses, ResourceSlices, ResourceClaims (allocated "
                    "ones count as taken), ResourceClaimTemplates and Pods, and report for "
                    "the pod, on every node given (default: every node known), whether and "
                    "how its claims can be allocated.")
    add_objects_argument(parser, required=False,
                         help="YAML/JSON files or folders with the objects "
                              "(default: the settings' inventory)")
    parser.add_argument("--pod", required=True, metavar="NAMESPACE/NAME",
                        help="the Pod among the objects whose claims to allocate")
    parser.add_argument("--node", action="append", default=[], metavar="NAME",
                        help="evaluate only this node (repeatable)")
    add_feature_gates_argument(parser)
    parser.add_argument("--mode", choices=MODES,
                        help="allocator: best allocation; advisor: upstream first fit "
                             "(default: the settings' mode, allocator)")
    add_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(func=run)


@command("allocate")
def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    extender, pod, nodes, inventory, config = _load(args)
    evaluations = extender.evaluate(pod, nodes)
    topologies = _topologies(inventory, evaluations, config)
    document = {"pod": pod.key, "nodes": [
        {**ev.to_dict(), "topology": t.to_dict() if (t := topologies.get(ev.node)) else None}
        for ev in evaluations]}
    write_output(out, args.output, document=document,
                 table=lambda: render_table(pod.key, evaluations, topologies))
    return 0


def _topologies(inventory: Inventory, evaluations: Sequence[NodeEvaluation],
                config: TopologyConfig) -> dict[str, AllocationTopology]:
    """Root, NUMA node, tier and score of each feasible node's devices."""
    out = {}
    for ev in evaluations:
        state = inventory.node_state(ev.node) if ev.feasible and ev.claims else None
        if state is not None:
            out[ev.node] = explain(ev.claims, node_view=state.view, allocated=state.allocated,
                                   config=config)
    return out


def _load(args: argparse.Namespace
          ) -> tuple[Extender, Any, list[str], Inventory, TopologyConfig]:
    settings = command_settings(args, ("mode", "feature_gates"))
    key = namespaced_key(args.pod, "--pod")
    inventory = source_of(args, settings).inventory()
    pod = inventory.pod(key)
    if pod is None:
        raise InputError(f"pod {key} is not among the objects")
    nodes = served_nodes(inventory, settings, args.node)
    config = topology_config(settings)
    extender = Extender(inventory, features=settings.features, mode=settings.mode,
                        topology_config=config, file_mode=True)
    return extender, pod, nodes, inventory, config


def render_table(pod_key: str, evaluations: Sequence[NodeEvaluation],
                 topologies: Mapping[str, AllocationTopology] | None = None) -> str:
    lines = [f"pod {pod_key}"]
    rows = [("NODE", "FEASIBLE", "SCORE", "DEVICES / REASON")]
    for ev in evaluations:
        topology = (topologies or {}).get(ev.node)
        if ev.feasible:
            detail = "; ".join(
                f"{ca.claim_key}: " + ", ".join(
                    f"{r.request}={r.driver}/{r.pool}/{r.device}"
                    + (f"[{r.share_id}]" if r.share_id else "")
                    + (f"@{topology.label(r.device_id)}" if topology else "")
                    for r in ca.allocation.results)
                for ca in ev.claims) or "(no devices needed)"
            if topology is not None:
                detail = f"{topology.quality.tier_name} ({topology.quality.score:.3f}): " + detail
        elif ev.error is not None:
            detail = f"error: {ev.error}"
        else:
            detail = ev.reason or ""
        rows.append((ev.node, "yes" if ev.feasible else "no",
                     "-" if ev.score is None else str(ev.score), detail))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True))
                     + "  " + row[3])
    return "\n".join(lines) + "\n"
