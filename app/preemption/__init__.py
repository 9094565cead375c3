"""Device-aware preemption: which running pods must go so a pod's claims fit.

The victim search, pure logic: `search` ranks the candidate nodes as
kube-scheduler does and chooses each node's answer (see its module doc);
`problem` states one node's problem in canonical terms, `held` what its pods
hold, `solve` finds its smallest victim sets that work, `counting` rules
sets out before the allocator runs and gives the search its floors, `parts`
shares allocator runs per part of a node, `ceiling` bounds a node's topology
score, `fit` checks cpu, memory and pods, and `importance` is
kube-scheduler's order among victims and its PDB count. The preempt verb
(`verb`), `drax preempt` and the acting side build on `VictimSearch.search`
and read its typed `PreemptionPlan`. The acting side, kube mode only:
`driver` finds the pods to preempt for, `actor` writes the preemption to the
API server, `catchup` reads a nominated preemptor's victims' claims before
its filter and counts its scheduling attempts (`attempts` tells them apart
from its filters), `metrics` counts the driver and actor.
"""

from app.preemption.actor import Actor, Outcome, Preemption
from app.preemption.catchup import Catchup, CatchupMetrics
from app.preemption.driver import Driver
from app.preemption.metrics import PreemptionMetrics
from app.preemption.search import (
    NodePreemption,
    PreemptionPlan,
    Victim,
    VictimSearch,
    pdb_violations,
)
from app.preemption.solve import DEFAULT_TRIAL_BUDGET
from app.preemption.verb import Offer, choose_victims

__all__ = [
    "DEFAULT_TRIAL_BUDGET", "Actor", "Catchup", "CatchupMetrics", "Driver", "NodePreemption",
    "Offer", "Outcome", "Preemption", "PreemptionMetrics", "PreemptionPlan", "Victim",
    "VictimSearch", "choose_victims", "pdb_violations",
]
