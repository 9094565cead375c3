"""Error types of the CEL engine, shaped like the messages Kubernetes prints.

`CelCompileError` and `CelEvalError` are the public contract (see
`app.cel`). `EvalError` is the engine's internal runtime error: it carries
the bare cel-go text (`no such key: x`) and becomes a `CelEvalError` with the
expression and device named only at the edge, so the hot path never formats.
`CostExceeded` is deliberately not an `EvalError`: `&&`, `||` and the
comprehension folds absorb runtime errors, but a cost stop must never be
absorbed.
"""

from __future__ import annotations

NO_SUCH_KEY_HINT = (". consider using CEL optional chaining (.? followed by orValue()) or "
                    "guarding the check with has() for optional fields")
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"


class CelError(Exception):
    """Any error from compiling or evaluating a DRA CEL selector."""


class CelCompileError(CelError):
    """The expression does not compile (syntax, type, result type, program build)."""


class CelEvalError(CelError):
    """Evaluation against one device failed; the message names expression and device."""


class EvalError(Exception):
    """A CEL runtime error value (internal; absorbed by `&&`/`||` where CEL says so)."""


class CostExceeded(Exception):
    """The per-evaluation cost budget ran out (internal; never absorbed)."""


def enhance_runtime_error(message: str) -> str:
    """Kubernetes appends a usage hint to every `no such key` error."""
    if "no such key:" in message:
        return message + NO_SUCH_KEY_HINT
    return message
