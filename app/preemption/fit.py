"""Whether a preemptor fits a node's cpu, memory and pods once its victims are
gone, and which further pods must go when it does not.

The victim search frees devices. kube-scheduler would still refuse the
preemptor on a node whose cpu, memory, ephemeral storage, pod count or
device-plugin resources it lacks (NodeResourcesFit). The check is
NodeResourcesFit's over what drax knows: the node's allocatable against the
requests of every live pod bound there (`Inventory.usage`), less those of
the victims, of the pods already terminating (they are going, as the search
counts their devices), and, for the preempt verb, of the offered pods the
answer keeps; plus those of the pods nominated to the node
(`status.nominatedNodeName`) with a priority no lower than the preemptor's,
as kube-scheduler's `addNominatedPods` adds them (the preemptor itself
aside). Only the pods of the preemptor's kube-scheduler count: one
kube-scheduler keeps one queue and one nominator for all its profiles, and
only the pods of its profiles (`spec.schedulerName`) enter it, so a pod
another scheduler nominated there is invisible to it. Its profiles are the
names drax serves (`schedulers`, drax's `scheduler_name` setting) when the
preemptor's is one of them, else the preemptor's own name alone. An extended
resource the node does not advertise and a DeviceClass serves is DRA's (the
search judges it). A node that reports no allocatable is not judged.

When the pod lacks room with the device victims gone (`NodeFit.room`), the
other pods of lower priority on the node (running, not already going, and
for the verb among those offered) become victims too, chosen as
kube-scheduler's `SelectVictimsOnNode` chooses: all of them go; if the pod
still lacks room the node is refused (`Shortfall`); otherwise they are
reprieved one by one, those whose going would violate a PodDisruptionBudget
first and then the others, each group most important first (higher
priority, then earlier start), and each stays if the pod still has room with
it back. The device victims are never reprieved: they are the smallest set
that frees the devices, and the room victims come on top of them. Where the
devices need no victim, room alone is kube-scheduler's own preemption's job:
the search only refuses such a node (`NodeFit.refusal`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction

from app.extender.extended import resource_classes
from app.inventory import Inventory
from app.inventory.occupants import priority_of
from app.inventory.usage import NodeUsage, Usage
from app.model import Pod, PodDisruptionBudget
from app.model.quantity import BINARY_SI, DECIMAL_SI, canonical_string
from app.model.requests import PODS, Resources
from app.preemption.importance import importance, pdb_violating

# spec.schedulerName of a pod that names none (the API server's default)
DEFAULT_SCHEDULER = "default-scheduler"

# A pod that must go for room: the pod, its priority, the claims it holds.
Extra = tuple[Pod, int, tuple[str, ...]]


class Shortfall(str):
    """Why a node lacks room for the pod (cpu, memory, pods, a device-plugin
    resource), as opposed to lacking devices: the preemption loop searches a
    pod refused for room again once a pod on such a node changes."""

    __slots__ = ()


def short_of_room(refused: Mapping[str, str]) -> list[str]:
    """The nodes of a search's refusals that were refused for room."""
    return [node for node, why in refused.items() if isinstance(why, Shortfall)]


class NodeFit:
    """The fit check of one preemptor over one inventory (one search)."""

    def __init__(self, pod: Pod, inventory: Inventory,
                 allowed: Mapping[str, Collection[str] | None] | None = None, *,
                 schedulers: Collection[str] = ()) -> None:
        self._pod = pod
        self._profiles = profiles_of(pod, schedulers)
        self._requests = pod.requests
        self._inventory = inventory
        self._allowed = allowed
        self._priority = priority_of(pod, inventory.occupants)
        self._dra = (frozenset(resource_classes(inventory.classes))
                     if pod.requests.scalars else frozenset())
        self._lower: dict[str, list[tuple[Usage, int]]] = {}
        self._base: dict[str, tuple[NodeUsage, Resources, int, Resources | None]] = {}
        # per (node, victims, candidates): `room`'s answer (a node's pick and its
        # answer ask twice)
        self._rooms: dict[tuple[str, tuple[str, ...], tuple[str, ...]],
                          tuple[Extra, ...] | Shortfall] = {}
        # per node: whether the pod has room there with no pod gone (`fits`)
        self._roomy: dict[str, bool] = {}
        self.room_reads = 0  # nodes read for room with no pod gone (for tests)

    def refusal(self, node: str, victims: Iterable[Pod], candidates: Iterable[Pod] = ()
                ) -> Shortfall | None:
        """Why the pod would not fit `node` with `victims` gone (None: it fits,
        or the node's size is unknown). `candidates`: the pods the search
        weighed; offered pods outside them stay in the verb's answer."""
        found = self._staying(node, victims, candidates)
        if found is None:
            return None
        _, staying, count, allocatable = found
        short = lacking(self._requests, allocatable, staying, count, dra=self._dra)
        return None if short is None else Shortfall(short)

    def fits(self, node: str, victims: Iterable[Pod], candidates: Iterable[Pod] = ()) -> bool:
        """`refusal(...) is None`, without wording the refusal. A pod with room
        on the node as it is has room once any pods go (they only free), so
        that is read once per node (`roomy`), and its victims only where it
        has not."""
        if self.roomy(node):
            return True
        found = self._staying(node, victims, candidates)
        if found is None:
            return True
        _, staying, count, allocatable = found
        return _fits(self._requests, allocatable, staying, count, self._dra)

    def roomy(self, node: str) -> bool:
        """Whether the pod has room on `node` with no pod gone (or the node's
        size is not known), read once per node: then it fits whoever goes."""
        roomy = self._roomy.get(node)
        if roomy is None:
            roomy = self._roomy[node] = self._room_as_is(node)
        return roomy

    def _room_as_is(self, node: str) -> bool:
        self.room_reads += 1
        base = self._base.get(node)
        if base is None:
            base = self._base[node] = self._node_base(node)
        _, staying, count, allocatable = base
        return allocatable is None or _fits(self._requests, allocatable, staying, count,
                                            self._dra)

    def lacks(self, node: str, victims: Iterable[Pod]) -> tuple[str, ...]:
        """The resources the pod lacks on `node` once `victims` are gone, in
        NodeResourcesFit's order (`pods` for the pod count; empty: it fits, or
        the node's size is unknown): what room victims added on top of them
        free."""
        found = self._staying(node, victims, ())
        if found is None:
            return ()
        _, staying, count, allocatable = found
        return tuple(short[0] for short in _shortfalls(self._requests, allocatable, staying,
                                                      count, self._dra))

    def room(self, node: str, victims: Iterable[Pod], candidates: Iterable[Pod] = ()
             ) -> tuple[Extra, ...] | Shortfall:
        """The further pods that must go so the pod has room on `node` once
        `victims` are gone, most important first (empty: it has room, or the
        node's size is unknown), or why even all of them going is not enough
        (see the module doc)."""
        victims, candidates = tuple(victims), tuple(candidates)
        memo = (node, tuple(v.key for v in victims), tuple(c.uid for c in candidates))
        hit = self._rooms.get(memo)
        if hit is None:
            hit = self._rooms[memo] = self._room(node, victims, candidates)
        return hit

    def _room(self, node: str, victims: Sequence[Pod], candidates: Iterable[Pod]
              ) -> tuple[Extra, ...] | Shortfall:
        found = self._staying(node, victims, candidates)
        if found is None:
            return ()
        leaving, staying, count, allocatable = found
        requests, dra = self._requests, self._dra
        if _fits(requests, allocatable, staying, count, dra):
            return ()
        others = self._others(node, leaving)
        if not others:
            return Shortfall(lacking(requests, allocatable, staying, count, dra=dra) or "")
        for usage, _ in others:
            staying = staying - usage.requests
        count -= len(others)
        if not _fits(requests, allocatable, staying, count, dra):
            return Shortfall(lacking(requests, allocatable, staying, count, dra=dra,
                                     after="with every lower-priority pod gone") or "")
        order = others
        if self._inventory.occupants.pdb_table():
            gone = [self._usage(node, key) for key in leaving]
            violating = pdb_violating(
                [*((u, self._priority_of(u)) for u in gone if u), *others], self.pdbs)
            order = ([o for o in others if violating[o[0].uid]]
                     + [o for o in others if not violating[o[0].uid]])
        extra: list[tuple[Usage, int]] = []
        for usage, priority in order:
            back = staying + usage.requests
            if _fits(requests, allocatable, back, count + 1, dra):
                staying, count = back, count + 1
            else:
                extra.append((usage, priority))
        extra.sort(key=_importance)
        claims = self._claims(node) if any(isinstance(u, Pod) for u, _ in extra) else {}
        return tuple((as_pod(u), priority, claims.get(u.uid, ())) for u, priority in extra)

    # ------------------------------------------------------------------ parts

    def _staying(self, node: str, victims: Iterable[Pod], candidates: Iterable[Pod]
                 ) -> tuple[set[str], Resources, int, Resources] | None:
        """The keys of the pods leaving (victims, offered pods the verb keeps),
        the requests of the pods staying plus those nominated there that the
        pod must yield to, their count, and the node's allocatable (None: not
        known)."""
        base = self._base.get(node)
        if base is None:
            base = self._base[node] = self._node_base(node)
        held, before, before_count, allocatable = base
        if allocatable is None:
            return None
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
        staying = before
        for key in leaving:
            staying = staying - held.pods[key].requests
        return leaving, staying, before_count - len(leaving), allocatable

    def _node_base(self, node: str) -> tuple[NodeUsage, Resources, int, Resources | None]:
        """The node's pods, the requests of those not going plus those
        nominated there that the pod must yield to, their count, and its
        allocatable (None: not known); read once per search."""
        state = self._inventory.node_state(node)
        allocatable = None if state is None else state.view.node.resources
        held = self._inventory.usage.on(node)
        staying = held.requested - held.going
        count = len(held.pods) - held.going_count
        profiles = self._profiles
        for usage in self._inventory.usage.nominated(node).values():
            if (usage.uid != self._pod.uid and scheduler_of(usage) in profiles
                    and self._priority_of(usage) >= self._priority):
                staying = staying + usage.requests
                count += 1
        return held, staying, count, allocatable

    def _others(self, node: str, leaving: Collection[str]) -> list[tuple[Usage, int]]:
        """The pods of lower priority on `node` that may go besides `leaving`,
        most important first (the node's are read once per search)."""
        lower = self._lower.get(node)
        if lower is None:
            allow = None if self._allowed is None else self._allowed.get(node)
            lower = []
            for usage in self._inventory.usage.on(node).pods.values():
                if usage.deleting or (allow and usage.uid not in allow):
                    continue
                if isinstance(usage, Pod) and usage.terminal:
                    continue
                priority = self._priority_of(usage)
                if priority < self._priority:
                    lower.append((usage, priority))
            lower.sort(key=_importance)
            self._lower[node] = lower
        return [entry for entry in lower if entry[0].key not in leaving]

    def _usage(self, node: str, key: str) -> Usage | None:
        return self._inventory.usage.on(node).pods.get(key)

    def _priority_of(self, usage: Usage) -> int:
        return priority_of(usage, self._inventory.occupants)

    def pdbs(self, namespace: str) -> Iterable[PodDisruptionBudget]:
        return self._inventory.occupants.pdbs(namespace)

    def _claims(self, node: str) -> dict[str, tuple[str, ...]]:
        return {h.pod.uid: h.keys for h in self._inventory.occupants.occupancy(node)}


def scheduler_of(usage: Usage) -> str:
    """The pod's spec.schedulerName, defaulted as the API server defaults it."""
    return usage.scheduler_name or DEFAULT_SCHEDULER


def profiles_of(pod: Usage, schedulers: Collection[str]) -> frozenset[str]:
    """The scheduler names of `pod`'s kube-scheduler (see the module doc): the
    names drax serves, `schedulers`, when `pod`'s is one, else its own."""
    own = scheduler_of(pod)
    return frozenset(schedulers) if own in schedulers else frozenset((own,))


def _importance(entry: tuple[Usage, int]) -> tuple[int, float, str]:
    return importance(*entry)


def as_pod(usage: Usage) -> Pod:
    """The pod to act on: itself, or a `Pod` with what a victim needs."""
    if isinstance(usage, Pod):
        return usage
    return Pod(namespace=usage.namespace, name=usage.name, uid=usage.uid,
               node_name=usage.node_name, priority=usage.priority,
               priority_class_name=usage.priority_class_name, deleting=usage.deleting,
               start_time=usage.start_time, labels=usage.labels, requests=usage.requests)


def lacking(requests: Resources, allocatable: Resources, staying: Resources,
            pods_staying: int, *, dra: Collection[str] = (),
            after: str = "after victims") -> str | None:
    """NodeResourcesFit's first shortfall, in its order (pods, cpu, memory,
    ephemeral-storage, scalar resources), or None when the pod fits."""
    short = _first_short(requests, allocatable, staying, pods_staying, dra)
    if short is None:
        return None
    name, wanted, free, milli = short
    if name == PODS:
        return (f"node would have too many pods: {allocatable.pods} allowed, "
                f"{pods_staying} stay {after}")
    return _short(name, wanted, free, milli, after)


def _fits(requests: Resources, allocatable: Resources, staying: Resources,
          pods_staying: int, dra: Collection[str]) -> bool:
    return _first_short(requests, allocatable, staying, pods_staying, dra) is None


def _first_short(requests: Resources, allocatable: Resources, staying: Resources,
                 pods_staying: int, dra: Collection[str]) -> tuple[str, int, int, int] | None:
    """`lacking`'s shortfall as (resource, wanted, free, 1000 for millicores)."""
    return next(_shortfalls(requests, allocatable, staying, pods_staying, dra), None)


def _shortfalls(requests: Resources, allocatable: Resources, staying: Resources,
                pods_staying: int, dra: Collection[str]) -> Iterator[tuple[str, int, int, int]]:
    """Every shortfall, in NodeResourcesFit's order, as `_first_short` words one."""
    if pods_staying + 1 > allocatable.pods:
        yield (PODS, 1, allocatable.pods - pods_staying, 0)
    checks = (("cpu", requests.milli_cpu, allocatable.milli_cpu - staying.milli_cpu, 1000),
              ("memory", requests.memory, allocatable.memory - staying.memory, 0),
              ("ephemeral-storage", requests.ephemeral_storage,
               allocatable.ephemeral_storage - staying.ephemeral_storage, 0))
    for name, wanted, free, milli in checks:
        if wanted > 0 and wanted > free:
            yield (name, wanted, free, milli)
    for name, wanted in requests.scalars:
        have = allocatable.scalar(name)
        if wanted <= 0 or (not have and name in dra):
            continue
        free = have - staying.scalar(name)
        if wanted > free:
            yield (name, wanted, free, 0)


def _short(name: str, wanted: int, free: int, milli: int, after: str) -> str:
    return (f"node would lack {name}: requests {_amount(wanted, milli)}, "
            f"free {after} {_amount(free, milli)}")


def _amount(value: int, milli: int) -> str:
    if milli:
        return canonical_string(Fraction(value, milli), DECIMAL_SI)
    return canonical_string(Fraction(value), BINARY_SI)
