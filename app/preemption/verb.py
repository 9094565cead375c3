"""The extender `preempt` verb's choice: device-aware victims from the offered pods.

kube-scheduler sends, per candidate node, the victims its own dry run chose
(or, from 1.38, an empty list for a node that failed only extenders: the
extender may then name victims itself). Per node drax answers:

- with an offered list: the smallest set of the offered pods that frees
  devices for all of the preemptor's claims (the victim search restricted to
  them), plus the offered pods holding no devices the preemptor could use.
  Those were chosen for resources drax does not judge (CPU, memory, ports),
  so they stay;
- with an empty list: the victims the search chooses among every pod drax
  knows on the node;
- no entry for a node where no such set exists, or where nothing needs to go
  (a reply naming no victims for a node is an error to the scheduler).

Every UID answered is one offered for that node or a pod drax knows is bound
there. NumPDBViolations is recounted for the answer over the pods drax knows.
A pod that may not preempt (policy Never) gets no node; a pod whose claims
are not drax's business (none, or unknown) gets the scheduler's lists back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.inventory.occupants import preemption_policy_of, priority_of
from app.model import Pod, PodDisruptionBudget
from app.model.objects import PREEMPT_NEVER
from app.preemption.search import NodePreemption, Victim, VictimSearch, pdb_violations


@dataclass(slots=True, frozen=True)
class Offer:
    """One node's victims as the scheduler sends or drax answers them."""

    uids: tuple[str, ...]
    pdb_violations: int = 0


def choose_victims(search: VictimSearch, pod: Pod, offered: Mapping[str, Offer]
                   ) -> dict[str, Offer]:
    """The answer per node (see the module doc)."""
    inventory = search.inventory
    occupants = inventory.occupants
    if preemption_policy_of(pod, occupants) == PREEMPT_NEVER:
        return {}
    allowed = {node: (frozenset(offer.uids) if offer.uids else None)
               for node, offer in offered.items()}
    plan = search.search(pod, list(offered), allowed=allowed)
    if plan.problem is not None:
        return {node: offer for node, offer in offered.items() if offer.uids}
    out: dict[str, Offer] = {}
    for found in plan.nodes:
        offer = offered[found.node]
        kept = _kept(offer.uids, found, search)
        uids = tuple(v.pod.uid for v in found.victims) + tuple(uid for uid, _ in kept)
        if not uids:
            continue
        known = [*found.victims, *(v for _, v in kept if v is not None)]
        out[found.node] = Offer(uids=uids, pdb_violations=pdb_violations(
            known, _pdbs(search, known)))
    return out


def _kept(uids: Sequence[str], found: NodePreemption, search: VictimSearch
          ) -> list[tuple[str, Victim | None]]:
    """Offered pods that cannot free devices for the preemptor: the scheduler
    chose them for its own reasons."""
    occupants = search.inventory.occupants
    considered = found.considered
    out: list[tuple[str, Victim | None]] = []
    for uid in uids:
        if uid in considered:
            continue
        pod = occupants.pod_by_uid(uid)
        if pod is None:
            out.append((uid, None))
        elif pod.node_name == found.node:
            out.append((uid, Victim(pod=pod, priority=priority_of(pod, occupants), claims=())))
    return out


def _pdbs(search: VictimSearch, victims: Sequence[Victim]
          ) -> dict[str, list[PodDisruptionBudget]]:
    occupants = search.inventory.occupants
    return {ns: list(occupants.pdbs(ns)) for ns in {v.pod.namespace for v in victims}}
