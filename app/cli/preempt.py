"""`drax preempt`: which running pods would have to go for a pod's devices, per node.

A dry run of the victim search drax preempts with (`app.preemption`): for the
pod (a NAMESPACE/NAME among the objects, or a Pod file), on every node given
(default: every node), the smallest set of lower-priority pods whose release
lets all its claims be allocated, the devices they free, the PDBs they would
violate, the allocation the pod would get, and the nodes ranked as
kube-scheduler ranks preemption candidates. Nodes where nothing works say
why. Nothing is deleted or written: it doubles as defragmentation advice
("to fit this 8-GPU pod, these three pods would have to go").

`--scheduler-name` names the kube-scheduler profiles drax serves, as `drax
serve`'s `scheduler_name` setting does: the pods nominated to a node by any
of them count against its room for a pod of one of them, as they count in
the search `drax serve` runs. With `--config` (or `DRAX_*`) the search runs
with the server's settings: its mode, feature gates, topology scoring,
profiles, node pool and objects, each flag given here taking precedence.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO

from app.cli.common import (
    InputError,
    add_config_argument,
    add_feature_gates_argument,
    add_output_argument,
    add_source_arguments,
    command,
    command_settings,
    parse_sourced,
    read_objects,
    served_nodes,
    source_of,
    write_output,
)
from app.config import DEFAULT_SCHEDULER_NAMES, MODES
from app.extender import Extender
from app.inventory import Inventory
from app.model import Pod
from app.model.times import format_time
from app.preemption import NodePreemption, PreemptionPlan, VictimSearch
from app.runtime import topology_config

EXIT_NO_NODE: Final = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "preempt", help="dry run: which lower-priority pods would go to fit a pod's devices",
        description="For the pod, on every node (or those given), find the smallest set of "
                    "running lower-priority pods whose removal lets all its claims be "
                    "allocated, rank the nodes as kube-scheduler ranks preemption "
                    "candidates, and print the victims and why. Acts on nothing.",
        epilog="Exit status: 0 some node can be freed for the pod; 1 none can (or the pod "
               "may not preempt); 2 bad input.")
    parser.add_argument("--pod", required=True, metavar="FILE|NAMESPACE/NAME",
                        help="a Pod among the objects, or a file holding one")
    add_source_arguments(parser)
    parser.add_argument("--node", action="append", default=[], metavar="NAME",
                        help="consider only this node (repeatable)")
    parser.add_argument("--mode", choices=MODES,
                        help="allocator: best allocation among the fewest victims; "
                             "advisor: upstream first fit (default: the settings' mode, "
                             "allocator)")
    parser.add_argument("--scheduler-name", metavar="NAME[,NAME]",
                        help="the kube-scheduler profiles drax serves, as `drax serve`'s "
                             "scheduler_name setting: the pods any of them nominated to a "
                             "node count against its room (default: the settings' "
                             f"scheduler_name, {','.join(DEFAULT_SCHEDULER_NAMES)})")
    add_feature_gates_argument(parser)
    add_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(func=run)


@command("preempt")
def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    settings = command_settings(args, ("mode", "scheduler_name", "feature_gates"))
    if not settings.preemption:
        print("drax preempt: the settings turn preemption off (preemption: false): this "
              "is the search drax serve would run, but it preempts for no pod", file=err)
    source = source_of(args, settings)
    inventory = source.inventory()
    pod = _pod(args.pod, inventory)
    extender = Extender(inventory, features=settings.features, mode=settings.mode,
                        topology_config=topology_config(settings), file_mode=bool(source.paths))
    unknown = [n for n in args.node if inventory.node_state(n) is None]
    if unknown:
        raise InputError(f"--node: unknown node(s) {', '.join(unknown)}")
    nodes = served_nodes(inventory, settings, args.node)
    search = VictimSearch.of(extender, schedulers=settings.scheduler_name)
    plan = search.search(pod, nodes)
    write_output(out, args.output, document=plan_document(plan),
                 table=lambda: render_table(plan, inventory))
    return 0 if plan.nodes else EXIT_NO_NODE


def _pod(text: str, inventory: Inventory) -> Pod:
    path = Path(text)
    if path.is_file():
        pods = [o for o in read_objects([text]) if o.obj.get("kind") == "Pod"]
        if len(pods) != 1:
            raise InputError(f"--pod {text}: expected one Pod in the file, found {len(pods)}")
        pod: Pod = parse_sourced("Pod", pods[0])
        inventory.upsert("Pod", pod)
        return pod
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name:
        raise InputError(f"--pod: expected a Pod file or NAMESPACE/NAME, got {text!r}")
    found = inventory.pod(text)
    if found is None:
        raise InputError(f"pod {text} is not among the objects")
    return found


# --------------------------------------------------------------------------- output


def plan_document(plan: PreemptionPlan) -> dict[str, Any]:
    return {
        "pod": plan.pod.key, "priority": plan.priority, "problem": plan.problem,
        "nodes": [{"rank": i + 1, **_node_document(n)} for i, n in enumerate(plan.nodes)],
        "refused": dict(sorted(plan.refused.items())),
    }


def _node_document(found: NodePreemption) -> dict[str, Any]:
    return {
        "node": found.node,
        "victims": [{"pod": v.pod.key, "uid": v.pod.uid, "priority": v.priority,
                     "startTime": _time(v.pod.start_time), "claims": list(v.claims),
                     "forRoom": v.for_room}
                    for v in found.victims],
        "pdbViolations": found.pdb_violations,
        "releasedClaims": list(found.released_claims),
        "freedDevices": list(found.freed_devices),
        "waitingFor": [p.key for p in found.terminating],
        "allocation": [{"claim": ca.claim_key,
                        "devices": [r.device_id for r in ca.allocation.results]}
                       for ca in found.allocation],
        "score": found.priority,
        "exact": found.exact,
    }


def _time(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return format_time(epoch)


def render_table(plan: PreemptionPlan, inventory: Inventory) -> str:
    head = f"pod {plan.pod.key} (priority {plan.priority})"
    if plan.problem is not None:
        return f"{head}: does not preempt: {plan.problem}\n"
    lines = [head]
    rows = [("RANK", "NODE", "VICTIMS", "PDB", "TOP PRIORITY", "SCORE")]
    for i, found in enumerate(plan.nodes):
        top = max((v.priority for v in found.victims), default=None)
        rows.append((str(i + 1), found.node, str(len(found.victims)) + ("" if found.exact
                                                                        else "~"),
                     str(found.pdb_violations), "-" if top is None else str(top),
                     str(found.priority)))
    for name in sorted(plan.refused):
        rows.append(("-", name, "-", "-", "-", "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    details = _details(plan, inventory)
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        for line in details.get((row[0], row[1]), ()):
            lines.append(" " * (widths[0] + 2) + line)
    return "\n".join(lines) + "\n"


def _details(plan: PreemptionPlan, inventory: Inventory
             ) -> Mapping[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for i, found in enumerate(plan.nodes):
        lines = []
        if not found.victims:
            lines.append("fits without victims" + (
                " once " + ", ".join(p.key for p in found.terminating) + " finish terminating"
                if found.terminating else ""))
        released = set(found.released_claims)
        for v in found.victims:
            frees = "frees " + _devices_of(found, v.claims, inventory)
            if v.for_room:
                frees = "makes room for the pod's cpu, memory or pod count" + (
                    f"; {frees}" if released.intersection(v.claims) else "")
            lines.append(f"- {v.pod.key} (priority {v.priority}): {frees}")
        if found.victims and found.terminating:
            lines.append("also counted as gone (terminating): "
                         + ", ".join(p.key for p in found.terminating))
        lines.append("then allocates: " + "; ".join(
            f"{ca.claim_key}: " + ", ".join(r.device for r in ca.allocation.results)
            for ca in found.allocation))
        if not found.exact:
            lines.append("(search budget reached: no victim can be spared, but a smaller set "
                         "may exist)")
        out[(str(i + 1), found.node)] = lines
    for name, reason in plan.refused.items():
        out[("-", name)] = [reason]
    return out


def _devices_of(found: NodePreemption, claims: tuple[str, ...], inventory: Inventory) -> str:
    """The devices of the victim's claims that its going releases, per claim."""
    released = set(found.released_claims)
    parts = []
    for key in claims:
        claim = inventory.claim(key)
        if key not in released or claim is None or claim.allocation is None:
            continue
        parts.append(f"{key} (" + ", ".join(r.device for r in claim.allocation.results) + ")")
    return ", ".join(parts) or "nothing alone (its claims are shared with other victims)"
