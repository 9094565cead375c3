"""`drax capacity`: how many more pods of one shape fit now, per node and in total.

The shape is the device claims one more pod would bring: a ResourceClaim's or
ResourceClaimTemplate's spec, a Pod's claims (through its claims and
templates), or `--gpus N [--nics M --same-root]`. Each node's number comes
from `app.capacity.count_fits`, the exact count of disjoint copies the
metrics' capacity gauges also use. A Pod's extended resources served by DRA
add, per node, the special claim the scheduler would build there; on a node
whose device plugin advertises the resource, the count is at most its
allocatable over the pod's request. Numbers that are not exact are marked `~`
in the table: a search that ran out of its step budget (a proven lower bound),
or a device-plugin bound (drax does not track what running pods hold of
device-plugin resources); `unbounded` is a shape that needs no devices there.
A node whose count fails (a selector's CEL runtime error) shows its error; the
JSON lists such nodes under `errors` and the inexact ones under `inexact`, and
the command exits 1, since its total is then not the cluster's.
The objects come from files, as `drax allocate` takes them, or from a live
cluster listed once through `--kubeconfig`; with `--config` (or `DRAX_*`) the
server's settings give the feature gates, the node pool and, unless a flag
names them, the objects.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, Final, TextIO

from app.capacity import MAX_COPIES, FitCount, PodShape, count_nodes, fresh_claim, gpu_shape
from app.cli.common import (
    InputError,
    add_config_argument,
    add_feature_gates_argument,
    add_output_argument,
    add_source_arguments,
    command,
    command_settings,
    namespaced_key,
    served_nodes,
    source_of,
    write_output,
)
from app.extender import ClaimResolver
from app.inventory import Inventory
from app.model import ResourceClaim

EXIT_NOT_COUNTED: Final = 1


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "capacity", help="how many more pods of a shape fit, per node and in total",
        description="Count, per node, the maximum number of disjoint allocations of a "
                    "claim shape next to what is allocated now (exact search, not a greedy "
                    "guess), and their total. `~` marks a count that is a lower bound.",
        epilog="Exit status: 0 every node counted; 1 some nodes not counted (their errors "
               "are listed, and they count 0 in the total); 2 bad input, or no node counted.")
    add_source_arguments(parser)
    shape = parser.add_mutually_exclusive_group(required=True)
    shape.add_argument("--claim", metavar="NAMESPACE/NAME", help="a ResourceClaim's spec")
    shape.add_argument("--template", metavar="NAMESPACE/NAME",
                       help="a ResourceClaimTemplate's spec")
    shape.add_argument("--pod", metavar="NAMESPACE/NAME", help="a Pod's claims")
    shape.add_argument("--gpus", type=int, metavar="N", help="N GPUs of class --gpu-class")
    parser.add_argument("--nics", type=int, default=0, metavar="M",
                        help="with --gpus: M NICs of class --nic-class")
    parser.add_argument("--same-root", action="store_true",
                        help="with --nics: GPUs and NICs on one PCIe root")
    parser.add_argument("--gpu-class", default="gpu.nvidia.com", metavar="CLASS",
                        help="the DeviceClass of --gpus (default: gpu.nvidia.com)")
    parser.add_argument("--nic-class", default="rdma.dra.net", metavar="CLASS",
                        help="the DeviceClass of --nics (default: rdma.dra.net)")
    parser.add_argument("--node", action="append", default=[], metavar="NAME",
                        help="count only this node (repeatable)")
    add_feature_gates_argument(parser)
    add_config_argument(parser)
    add_output_argument(parser)
    parser.set_defaults(func=run)


@command("capacity")
def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    settings = command_settings(args, ("feature_gates",))
    inventory = source_of(args, settings).inventory()
    shape = shape_of(args, inventory)
    unknown = [n for n in args.node if inventory.node_state(n) is None]
    if unknown:
        raise InputError(f"unknown node(s): {', '.join(unknown)}")
    nodes = served_nodes(inventory, settings, args.node)
    counts = count_nodes(inventory, shape, nodes=nodes, features=settings.features)
    errors = {n: c.error for n, c in counts.items() if c.error}
    if errors and len(errors) == len(counts):
        raise InputError(next(iter(errors.values())))
    write_output(out, args.output, document=document(counts),
                 table=lambda: render_table(counts))
    if errors:
        node, error = next(iter(errors.items()))
        print(f"drax capacity: {len(errors)} of {len(counts)} nodes not counted; "
              f"{node}: {error}", file=err)
        return EXIT_NOT_COUNTED
    return 0


def document(counts: Mapping[str, FitCount]) -> dict[str, Any]:
    """The JSON answer: the counts, and which of them are not exact or not counted.

    A node whose count failed (a CEL runtime error, say) counts 0 in `nodes` and
    `total` and is listed under `errors`; a count that is a lower bound (cut
    search, device-plugin bound, `unbounded`) is listed under `inexact`; `exact`
    says whether `total` is the true total.
    """
    errors = {n: c.error for n, c in counts.items() if c.error}
    inexact = [n for n, c in counts.items() if not c.exact and not c.error]
    return {"total": sum(c.count for c in counts.values()),
            "exact": not errors and not inexact,
            "nodes": {n: c.count for n, c in counts.items()},
            "inexact": inexact,
            "errors": errors}


def shape_of(args: argparse.Namespace, inventory: Inventory) -> PodShape:
    """The claims one more pod of the asked shape would bring, none allocated."""
    if args.gpus is not None:
        try:
            return PodShape(claims=(gpu_shape(
                gpus=args.gpus, nics=args.nics, same_root=args.same_root,
                gpu_class=args.gpu_class, nic_class=args.nic_class),))
        except ValueError as exc:
            raise InputError(f"--gpus: {exc}") from None
    if args.nics or args.same_root:
        raise InputError("--nics and --same-root go with --gpus")
    if args.claim:
        claim = inventory.claim(namespaced_key(args.claim, "--claim"))
        if claim is None:
            raise InputError(f"ResourceClaim {args.claim} is not among the objects")
        return PodShape(claims=(fresh_claim(claim),))
    if args.template:
        key = namespaced_key(args.template, "--template")
        template = next((t for t in inventory.templates() if f"{t.namespace}/{t.name}" == key),
                        None)
        if template is None:
            raise InputError(f"ResourceClaimTemplate {args.template} is not among the objects")
        return PodShape(claims=(ResourceClaim(namespace=template.namespace, name=template.name,
                                           spec=template.spec),))
    pod = inventory.pod(namespaced_key(args.pod, "--pod"))
    if pod is None:
        raise InputError(f"pod {args.pod} is not among the objects")
    claims = ClaimResolver(inventory, generate=True).resolve(pod)
    if claims.problem is not None:
        raise InputError(f"pod {args.pod}: {claims.problem}")
    return PodShape(claims=tuple(fresh_claim(c) for c in claims.claims), pod=pod,
                 extended=claims.extended)


def render_table(counts: Mapping[str, FitCount]) -> str:
    rows = [("NODE", "FITS")]
    for name, fit in counts.items():
        text = f"error: {fit.error}" if fit.error else (
            str(fit.count) if fit.exact else f"~{fit.count}" if fit.count < MAX_COPIES
            else "unbounded")
        rows.append((name, text))
    total = sum(c.count for c in counts.values())
    exact = all(c.exact and not c.error for c in counts.values())
    rows.append(("TOTAL", str(total) if exact else f"~{total}"))
    width = max(len(r[0]) for r in rows)
    return "".join(f"{a.ljust(width)}  {b}\n" for a, b in rows)
