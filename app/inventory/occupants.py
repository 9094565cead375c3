"""Who holds what: the running pods of each node, the claims they hold, the
PodDisruptionBudgets and PriorityClasses, as preemption reads them.

A pod holds a claim when the claim is allocated and its `status.reservedFor`
names the pod; the pod lists its claims itself (`spec.resourceClaims`, the
generated names in `status.resourceClaimStatuses`, the claim for extended
resources), so a node's holdings are found from its pods without a second
index of claims. Kept apart from the device index (`store`) because it
changes with pods, which come and go far more often than devices, and
nothing here stamps a node's version: which pods hold a claim changes no
allocation the filter can see.

Per pod the index keeps one entry by UID and one in its node's table, both
pointing at the parsed `Pod`; label maps and repeated strings are shared at
parse time (`app.model.parse.shared_labels`), so 10,000 pods cost their
`Pod` objects and two dictionary slots each.

A node's `occupancy` is read by every preemption search for every candidate
node, and churn changes one pod at a time, so it is kept per pod (`Holder`)
and per node, and built lazily: an event only drops what it can change. A
pod's holder reads the pod, the claims it lists and, per claim held, the pods
its reservations name; so it is dropped when the pod changes, when a claim
whose reservations name it changes (a pod holds only claims reserved for
it), or when a pod that one of those claims' reservations names (by UID, or
by name where the reservation or the pod has no UID: `names`) comes, changes
or goes, on any node (`_named_in`, per claim: no index is kept per pod). A node's tuple is then
rebuilt from its pods' kept holders, and stays the same object when none of
them changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from app.model import Pod, PodDisruptionBudget, PriorityClass, ResourceClaim
from app.model.objects import PREEMPT_LOWER_PRIORITY, ResourceClaimConsumerReference
from app.model.requests import PodUsage

PODS_RESOURCE: Final = "pods"
_UNREAD: Final[Any] = object()  # a pod whose holder is to be read


@dataclass(slots=True, frozen=True)
class Holder:
    """A pod holding claims on its node: the claims, their keys, and per claim
    the pods it is reserved for (None: a consumer not known here)."""

    pod: Pod
    claims: tuple[ResourceClaim, ...]
    keys: tuple[str, ...]
    reservers: tuple[tuple[Pod | None, ...], ...]
    devices: tuple[tuple[str, ...], ...]  # per claim, its results' device ids


class Occupants:
    """Pods by node and UID, PDBs by namespace, PriorityClasses by name."""

    __slots__ = ("_by_uid", "_claim", "_classes", "_default_class", "_holders", "_named_in",
                 "_occupancy", "_on_node", "_pdbs", "_pod", "_stale")

    def __init__(self, *, claim: Callable[[str], ResourceClaim | None],
                 pod: Callable[[str], Pod | None]) -> None:
        # the inventory's lookups by "namespace/name"
        self._claim = claim
        self._pod = pod
        self._by_uid: dict[str, Pod] = {}
        self._on_node: dict[str, dict[str, Pod]] = {}  # node -> pod key -> pod
        self._pdbs: dict[str, dict[str, PodDisruptionBudget]] = {}  # namespace -> name -> PDB
        self._classes: dict[str, PriorityClass] = {}
        self._default_class: PriorityClass | None = None
        # pod key -> its `Holder` (None: it holds nothing), for pods bound to a node;
        # absent: to be read again
        self._holders: dict[str, Holder | None] = {}
        # a reservation's pod, as `reservers` looks it up (its UID, and its
        # namespace/name) -> the keys of the claims whose reservations name it
        self._named_in: dict[tuple[bool, str], set[str]] = {}
        # node -> its `occupancy` as last built; `_stale`: nodes some of whose
        # holders were dropped since (or whose pods came or went)
        self._occupancy: dict[str, tuple[Holder, ...]] = {}
        self._stale: set[str] = set()

    # ------------------------------------------------------------------ updates (the store)

    def put_pod(self, old: Pod | None, pod: Pod) -> None:
        # The same pod on the same node (a status update, mostly) changes only
        # its object, in its place; any other old copy goes first.
        if old is not None and (old.uid != pod.uid or old.node_name != pod.node_name):
            self.remove_pod(old)
        if pod.uid:
            self._by_uid[pod.uid] = pod
        if pod.node_name:
            key = pod.key
            self._on_node.setdefault(pod.node_name, {})[key] = pod
            self._drop(key, pod.node_name)
        self._reserver_changed(pod)

    def remove_pod(self, pod: Pod) -> None:
        if pod.uid and self._by_uid.get(pod.uid) is pod:
            del self._by_uid[pod.uid]
        if pod.node_name:
            key = pod.key
            self._drop(key, pod.node_name)
            table = self._on_node.get(pod.node_name)
            if table is not None and table.get(key) is pod:
                del table[key]
                if not table:
                    del self._on_node[pod.node_name]
                    self._occupancy.pop(pod.node_name, None)
                    self._stale.discard(pod.node_name)
        self._reserver_changed(pod)

    def claim_changed(self, old: ResourceClaim | None, new: ResourceClaim | None) -> None:
        """A claim came, changed or went: the pods its reservations name (before
        or after, the only pods that can hold it) hold otherwise."""
        for claim in (old, new):
            if claim is not None:
                self._drop_named(claim)
        if old is not None and new is not None and old.reserved_for == new.reserved_for:
            return  # the same reservations (and namespace and name): `_named_in` holds
        if old is not None:
            key = old.key
            for name in _named(old):
                keys = self._named_in.get(name)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._named_in[name]
        if new is not None:
            key = new.key
            for name in _named(new):
                self._named_in.setdefault(name, set()).add(key)

    def _reserver_changed(self, pod: Pod) -> None:
        """`pod` came, changed or went: the holders of claims whose reservations
        name it see another pod (or none) there."""
        by_uid = self._named_in.get((True, pod.uid), ()) if pod.uid else ()
        for claim_key in by_uid:
            claim = self._claim(claim_key)
            if claim is not None:
                self._drop_named(claim)
        for claim_key in self._named_in.get((False, pod.key), ()):
            if claim_key not in by_uid:  # each claim's holders dropped once
                claim = self._claim(claim_key)
                if claim is not None:
                    self._drop_named(claim)

    def _drop_named(self, claim: ResourceClaim) -> None:
        """Drops the holders of the pods `claim`'s reservations name: a pod holds
        a claim reserved for its UID, or for its name where either has no UID
        (`reserved_for`), so both are looked up."""
        for ref in claim.reserved_for:
            if ref.resource != PODS_RESOURCE:
                continue
            pod = self._by_uid.get(ref.uid) if ref.uid else None
            if pod is not None and pod.node_name:
                self._drop(pod.key, pod.node_name)
            if pod is None or pod.name != ref.name or pod.namespace != claim.namespace:
                pod = self._pod(f"{claim.namespace}/{ref.name}")
                if pod is not None and pod.node_name:
                    self._drop(pod.key, pod.node_name)

    def _drop(self, pod_key: str, node_name: str) -> None:
        self._holders.pop(pod_key, None)
        self._stale.add(node_name)

    def put_pdb(self, pdb: PodDisruptionBudget) -> None:
        self._pdbs.setdefault(pdb.namespace, {})[pdb.name] = pdb

    def remove_pdb(self, key: str) -> None:
        namespace, _, name = key.partition("/")
        table = self._pdbs.get(namespace)
        if table is not None and table.pop(name, None) is not None and not table:
            del self._pdbs[namespace]

    def put_priority_class(self, pc: PriorityClass) -> None:
        self._classes[pc.name] = pc
        self._find_default()

    def remove_priority_class(self, name: str) -> None:
        if self._classes.pop(name, None) is not None:
            self._find_default()

    def _find_default(self) -> None:
        # The API admits one globalDefault class; with several, admission takes
        # the one of lowest value, as here.
        defaults = [pc for pc in self._classes.values() if pc.global_default]
        self._default_class = min(defaults, key=lambda pc: (pc.value, pc.name),
                                  default=None)

    # ------------------------------------------------------------------ tables (the store's)

    def pdb_table(self) -> Mapping[str, PodDisruptionBudget]:
        return {pdb.key: pdb for table in self._pdbs.values() for pdb in table.values()}

    @property
    def priority_classes(self) -> Mapping[str, PriorityClass]:
        return self._classes

    # ------------------------------------------------------------------ reads

    def pods_on(self, node_name: str) -> Iterable[Pod]:
        """Every pod bound to `node_name` (any phase; `holder` says which hold devices)."""
        return self._on_node.get(node_name, {}).values()

    def occupancy(self, node_name: str) -> tuple[Holder, ...]:
        """The pods on the node that hold claims, each with its claims and, per
        claim, who else it is reserved for; kept per pod and per node until an
        event can change them (every preemption search reads every
        candidate's), and the same tuple while none of its holders changed."""
        kept = self._occupancy.get(node_name)
        if kept is not None and node_name not in self._stale:
            return kept
        holders = self._holders
        out = []
        for key, pod in self._on_node.get(node_name, {}).items():
            holder = holders.get(key, _UNREAD)
            if holder is _UNREAD:
                holder = holders[key] = self.holder(pod)
            if holder is not None:
                out.append(holder)
        self._stale.discard(node_name)
        if kept is not None and len(kept) == len(out) and all(
                a is b for a, b in zip(kept, out, strict=True)):
            return kept
        if node_name not in self._on_node:
            return ()
        held = self._occupancy[node_name] = tuple(out)
        return held

    def holder(self, pod: Pod) -> Holder | None:
        """`pod`'s `Holder` read afresh: the allocated claims reserved for it, in
        its spec order (then the claim for its extended resources); None when
        it holds nothing."""
        claims, keys, reservers, devices = [], [], [], []
        for name in claim_names(pod):
            key = f"{pod.namespace}/{name}"
            claim = self._claim(key)
            if claim is None or claim.allocation is None or not reserved_for(claim, pod):
                continue
            claims.append(claim)
            keys.append(key)
            reservers.append(self.reservers(claim))
            devices.append(tuple([r.device_id for r in claim.allocation.results]))
        if not claims:
            return None
        return Holder(pod=pod, claims=tuple(claims), keys=tuple(keys),
                      reservers=tuple(reservers), devices=tuple(devices))

    def pod_by_uid(self, uid: str) -> Pod | None:
        return self._by_uid.get(uid)

    def pdbs(self, namespace: str) -> Iterable[PodDisruptionBudget]:
        return self._pdbs.get(namespace, {}).values()

    def priority_class(self, name: str) -> PriorityClass | None:
        return self._classes.get(name)

    @property
    def default_priority_class(self) -> PriorityClass | None:
        return self._default_class

    def reservers(self, claim: ResourceClaim) -> tuple[Pod | None, ...]:
        """The pods in `claim.status.reservedFor`, None for one not known here
        (deleted already, or a consumer that is not a pod): the pod of the
        reservation's UID, else the pod of its name if the reservation `names`
        it (objects written by hand, in file mode, may leave either UID out)."""
        out: list[Pod | None] = []
        for ref in claim.reserved_for:
            pod = None
            if ref.resource == PODS_RESOURCE and not ref.api_group:
                if ref.uid:
                    pod = self._by_uid.get(ref.uid)
                if pod is None:
                    pod = self._pod(f"{claim.namespace}/{ref.name}")
                    if pod is not None and not names(ref, pod):
                        pod = None
            out.append(pod)
        return tuple(out)


def claim_names(pod: Pod) -> list[str]:
    """The names of the claims `pod` uses: named, generated from a template, and
    the one for its extended resources."""
    names = []
    for entry in pod.resource_claims:
        if entry.resource_claim_name:
            names.append(entry.resource_claim_name)
        else:
            generated = pod.claim_statuses.get(entry.name)
            if generated:
                names.append(generated)
    if pod.extended_resource_claim_status is not None:
        names.append(pod.extended_resource_claim_status.resource_claim_name)
    return names


def _named(claim: ResourceClaim) -> list[tuple[bool, str]]:
    """The pods `claim`'s reservations name, as `Occupants.reservers` looks them
    up: (True, UID) for one with a UID, and (False, namespace/name) for each
    (the pod of that name when no pod has the UID)."""
    out = []
    for ref in claim.reserved_for:
        if ref.resource == PODS_RESOURCE and not ref.api_group:
            if ref.uid:
                out.append((True, ref.uid))
            out.append((False, f"{claim.namespace}/{ref.name}"))
    return out


def names(ref: ResourceClaimConsumerReference, pod: Pod) -> bool:
    """Whether the reservation `ref` (of a claim in `pod`'s namespace) names
    `pod`: by UID where both have one, else by name. The one rule: a pod
    holds the claims whose reservations name it (`reserved_for`), and a
    reservation's reserver is the pod it names (`Occupants.reservers`)."""
    return ref.resource == PODS_RESOURCE and (ref.uid == pod.uid if ref.uid and pod.uid
                                              else ref.name == pod.name)


def reserved_for(claim: ResourceClaim, pod: Pod) -> bool:
    return any(names(ref, pod) for ref in claim.reserved_for)


def priority_of(pod: Pod | PodUsage, occupants: Occupants) -> int:
    """spec.priority as admission sets it; for a pod that was never admitted
    (objects from files) its PriorityClass's value, else the global default's,
    else 0. The one reading of a pod's priority: the victim search, the holds
    and the order of preemptors all use it."""
    if pod.priority is not None:
        return pod.priority
    pc = _priority_class(pod, occupants)
    return pc.value if pc is not None else 0


def preemption_policy_of(pod: Pod, occupants: Occupants) -> str:
    if pod.preemption_policy:
        return pod.preemption_policy
    pc = _priority_class(pod, occupants)
    return pc.preemption_policy if pc is not None else PREEMPT_LOWER_PRIORITY


def _priority_class(pod: Pod | PodUsage, occupants: Occupants) -> PriorityClass | None:
    """The pod's named PriorityClass, else the global default."""
    return (occupants.priority_class(pod.priority_class_name) if pod.priority_class_name
            else occupants.default_priority_class)
