"""Whether a preemptor fits a node's cpu, memory and pods once its victims are gone.

The victim search frees devices. kube-scheduler would still refuse the
preemptor on a node whose cpu, memory, ephemeral storage, pod count or
device-plugin resources it lacks (NodeResourcesFit), and its own preemption
never frees them for a pod that fails only drax: such a node "fits with 0
victims" in its dry run. So drax refuses the node instead of deleting pods
for nothing. The check is NodeResourcesFit's over what drax knows: the
node's allocatable against the requests of every live pod bound there
(`Inventory.usage`), less those of the victims, of the pods already
terminating (they are going, as the search counts their devices), and, for
the preempt verb, of the offered pods the answer keeps. An extended resource
the node does not advertise and a DeviceClass serves is DRA's (the search
judges it). A node that reports no allocatable is not judged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from fractions import Fraction

from app.extender.extended import resource_classes
from app.inventory import Inventory
from app.model import Pod
from app.model.quantity import BINARY_SI, DECIMAL_SI, canonical_string
from app.model.requests import Resources


class NodeFit:
    """The fit check of one preemptor over one inventory (one search)."""

    def __init__(self, pod: Pod, inventory: Inventory,
                 allowed: Mapping[str, Collection[str] | None] | None = None) -> None:
        self._requests = pod.requests
        self._inventory = inventory
        self._allowed = allowed
        self._dra = (frozenset(resource_classes(inventory.classes))
                     if pod.requests.scalars else frozenset())

    def refusal(self, node: str, victims: Iterable[Pod], candidates: Iterable[Pod] = ()
                ) -> str | None:
        """Why the pod would not fit `node` with `victims` gone (None: it fits,
        or the node's size is unknown). `candidates`: the pods the search
        weighed; offered pods outside them stay in the verb's answer."""
        state = self._inventory.node_state(node)
        allocatable = None if state is None else state.view.node.resources
        if allocatable is None:
            return None
        held = self._inventory.usage.on(node)
        gone = held.going
        count = held.going_count
        leaving = set()
        for victim in victims:
            usage = held.pods.get(victim.key)
            if usage is not None and not usage.deleting:
                leaving.add(victim.key)
        allow = None if self._allowed is None else self._allowed.get(node)
        if allow:
            considered = {c.uid for c in candidates}
            leaving |= {key for key, usage in held.pods.items() if usage.uid in allow
                        and usage.uid not in considered and not usage.deleting}
        for key in leaving:
            gone = gone + held.pods[key].requests
        count += len(leaving)
        return lacking(self._requests, allocatable, held.requested - gone,
                       len(held.pods) - count, dra=self._dra)


def lacking(requests: Resources, allocatable: Resources, staying: Resources,
            pods_staying: int, *, dra: Collection[str] = ()) -> str | None:
    """NodeResourcesFit's first shortfall, in its order (pods, cpu, memory,
    ephemeral-storage, scalar resources), or None when the pod fits."""
    if pods_staying + 1 > allocatable.pods:
        return (f"node would have too many pods: {allocatable.pods} allowed, "
                f"{pods_staying} stay after victims")
    checks = (("cpu", requests.milli_cpu, allocatable.milli_cpu - staying.milli_cpu, 1000),
              ("memory", requests.memory, allocatable.memory - staying.memory, 0),
              ("ephemeral-storage", requests.ephemeral_storage,
               allocatable.ephemeral_storage - staying.ephemeral_storage, 0))
    for name, wanted, free, milli in checks:
        if wanted > 0 and wanted > free:
            return _short(name, wanted, free, milli)
    for name, wanted in requests.scalars:
        have = allocatable.scalar(name)
        if wanted <= 0 or (not have and name in dra):
            continue
        free = have - staying.scalar(name)
        if wanted > free:
            return _short(name, wanted, free, 0)
    return None


def _short(name: str, wanted: int, free: int, milli: int) -> str:
    return (f"node would lack {name}: requests {_amount(wanted, milli)}, "
            f"free after victims {_amount(free, milli)}")


def _amount(value: int, milli: int) -> str:
    if milli:
        return canonical_string(Fraction(value, milli), DECIMAL_SI)
    return canonical_string(Fraction(value), BINARY_SI)
