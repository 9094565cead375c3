"""The extender verbs (filter, prioritize, bind) as plain functions, no HTTP types.

The HTTP server and `drax allocate` both call `Extender`, so what the CLI
prints is what the scheduler is told.
"""

from app.extender.binder import BindCause, Binder, BindError, BindFailure, MemoryBinder
from app.extender.claims import ClaimResolver, PodClaims
from app.extender.verbs import Extender, FilterResult, NodeEvaluation, NodeScores

__all__ = ["BindCause", "BindError", "BindFailure", "Binder", "ClaimResolver", "Extender",
           "FilterResult", "MemoryBinder", "NodeEvaluation", "NodeScores", "PodClaims"]
