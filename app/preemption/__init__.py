"""Device-aware preemption: which running pods must go so a pod's claims fit.

`search` holds the pure victim search (see its module doc); the preempt verb,
`drax preempt` and the acting side build on `VictimSearch.search` and read
its typed `PreemptionPlan`.
"""

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
    "DEFAULT_TRIAL_BUDGET", "NodePreemption", "Offer", "PreemptionPlan", "Victim",
    "VictimSearch", "choose_victims", "pdb_violations", "preemption_policy_of", "priority_of",
]
