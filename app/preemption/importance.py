"""kube-scheduler's order among the pods a preemption may take, and which of
them a PodDisruptionBudget would not let go.

The victim search ranks nodes by these (`app.preemption.search`) and the
room check reprieves by them (`app.preemption.fit`); one home keeps the two
counting alike. MoreImportantPod: the higher priority first, then the
earlier start, a pod not started counting as starting now. PDB violations
are counted as FilterVictimsWithPDBViolation counts them: most important pod
first, each budget selecting it decremented in turn, and the pod violating
at the first budget that goes below 0 (the budgets after it are left as they
are). kube-scheduler takes the budgets in its lister's order, which is not
fixed; drax takes them by key, so an answer does not change with the order
the budgets were watched in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from app.inventory.usage import Usage
from app.model import PodDisruptionBudget


def start_of(usage: Usage) -> float:
    """The pod's start time, a pod not started counting as starting now (later
    than any start)."""
    return math.inf if usage.start_time is None else usage.start_time


def importance(usage: Usage, priority: int) -> tuple[int, float, str]:
    """Sort key, most important first (MoreImportantPod; the key breaks ties)."""
    return (-priority, start_of(usage), usage.key)


def pdb_violating(pods: Iterable[tuple[Usage, int]],
                  pdbs_in: Callable[[str], Iterable[PodDisruptionBudget]]) -> dict[str, bool]:
    """Per pod uid, whether its going would violate a PodDisruptionBudget
    (`pods`: each with its priority; `pdbs_in`: a namespace's budgets)."""
    allowed: dict[str, int] = {}
    ordered: dict[str, list[PodDisruptionBudget]] = {}
    out = {}
    for usage, _ in sorted(pods, key=lambda entry: importance(*entry)):
        violating = False
        if usage.labels:
            budgets = ordered.get(usage.namespace)
            if budgets is None:
                budgets = sorted(pdbs_in(usage.namespace), key=lambda pdb: pdb.key)
                ordered[usage.namespace] = budgets
            for pdb in budgets:
                if not pdb.selects(usage):
                    continue
                left = allowed.get(pdb.key, pdb.disruptions_allowed) - 1
                allowed[pdb.key] = left
                if left < 0:
                    violating = True
                    break
        out[usage.uid] = violating
    return out


def pdb_violation_count(pods: Iterable[tuple[Usage, int]],
                        pdbs_in: Callable[[str], Iterable[PodDisruptionBudget]]) -> int:
    """How many of `pods` a PodDisruptionBudget would not let go (`pdb_violating`)."""
    return sum(pdb_violating(pods, pdbs_in).values())
