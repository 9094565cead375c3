"""Device-aware preemption: which running pods must go so a pod's claims fit.

`search` holds the pure victim search (see its module doc); the preempt verb,
`drax preempt` and the acting side build on `VictimSearch.search` and read
its typed `PreemptionPlan`. The acting side, kube mode only: `driver` finds
the pods to preempt for, `actor` writes the preemption to the API server,
`catchup` reads a nominated preemptor's victims' claims before its filter
and counts its scheduling attempts (`attempts` tells them apart from its
filters), `metrics` counts the driver and actor.
"""

from app.preemption.actor import Actor, Outcome, Preemption
from app.preemption.catchup import Catchup, CatchupMetrics
from app.preemption.driver import Driver
from app.preemption.metrics import PreemptionMetrics
from app.preemption.search import (
    DEFAULT_TRIAL_BUDGET,
    NodePreemption,
    PreemptionPlan,
    Victim,
    VictimSearch,
    pdb_violations,
    preemption_policy_of,
    priority_of,
)
from app.preemption.verb import Offer, choose_victims

__all__ = [
    "DEFAULT_TRIAL_BUDGET", "Actor", "Catchup", "CatchupMetrics", "Driver", "NodePreemption",
    "Offer", "Outcome", "Preemption", "PreemptionMetrics", "PreemptionPlan", "Victim",
    "VictimSearch", "choose_victims", "pdb_violations", "preemption_policy_of", "priority_of",
]
