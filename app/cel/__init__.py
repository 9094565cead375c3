"""DRA CEL selectors with Kubernetes semantics: compile once, evaluate per device.

Contract (used by the allocator and the inventory):

    compile_selector(expression) -> CompiledSelector      # LRU-cached; raises CelCompileError
    CompiledSelector.matches(device: Device) -> bool      # raises CelEvalError
    CompiledSelector.projection(device) -> Hashable | None
        # devices with equal projections get equal results (None: not known)

The engine is drax's own (parser -> checker/closure compiler); see
`docs/decisions.md` ("CEL engine") for why not cel-python's evaluator.
Compile errors carry Kubernetes' text (`compilation failed: ERROR:
<input>:1:8: undefined field 'x'` plus the caret excerpt); runtime errors name
the expression and the device and carry the cel-go text in `detail`.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Final

from cachetools import LRUCache

from app.cel.compiler import COST_LIMIT, CheckError, Compiler, Ctx, Fn
from app.cel.device import device_view
from app.cel.errors import (
    COST_EXCEEDED,
    CelCompileError,
    CelError,
    CelEvalError,
    CostExceeded,
    EvalError,
    enhance_runtime_error,
)
from app.cel.footprint import Read, footprint, projection
from app.cel.parser import CelSyntaxError, parse
from app.cel.values import kind_of
from app.model import Device

__all__ = ["COST_LIMIT", "CelCompileError", "CelError", "CelEvalError", "CompiledSelector",
           "compile_selector", "compile_uncached"]

CACHE_SIZE: Final = 4096
MAX_EXPRESSION_LENGTH: Final = 10 * 1024


class CompiledSelector:
    """One compiled expression; `matches` is safe to call from any thread."""

    __slots__ = ("_fn", "_reads", "expression")

    def __init__(self, expression: str, fn: Fn, reads: tuple[Read, ...] | None = None) -> None:
        self.expression = expression
        self._fn = fn
        self._reads = reads

    @property
    def reads(self) -> tuple[Read, ...] | None:
        """Every device value the expression can read (`app.cel.footprint`), or
        None when that is not known."""
        return self._reads

    def projection(self, device: Device) -> Hashable | None:
        """What of `device` this expression can read (see `app.cel.footprint`), or
        None when that is not known and only the device itself determines the result."""
        if self._reads is None:
            return None
        return projection(self._reads, device)

    def matches(self, device: Device) -> bool:
        view = device_view(device)
        if view.error is not None:
            raise self._error(device, view.error)
        try:
            result = self._fn(Ctx(view))
        except EvalError as exc:
            raise self._error(device, enhance_runtime_error(str(exc))) from None
        except CostExceeded:
            raise self._error(device, COST_EXCEEDED) from None
        except (TypeError, ValueError, AttributeError, LookupError, ArithmeticError,
                RecursionError) as exc:
            # A value shape the overloads did not foresee: still a runtime error, not a crash.
            raise self._error(device, f"no such overload: {exc}") from None
        if result is True or result is False:
            return result
        kind = kind_of(result)
        raise self._error(device, f"CEL result of type {kind} could not be converted to bool: "
                                  f"type conversion error from '{kind}' to 'bool'")

    def _error(self, device: Device, detail: str) -> CelEvalError:
        # Kubernetes reports conversion and result-type failures as runtime errors too.
        err = CelEvalError(f"selector {self.expression!r} on device {device.id}: "
                           f"CEL runtime error: {detail}")
        err.detail = detail  # type: ignore[attr-defined]
        return err

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"


# Failed compilations are cached too (as their message): bad selectors repeat as well.
_cache: LRUCache[str, CompiledSelector | str] = LRUCache(maxsize=CACHE_SIZE)
_lock = threading.Lock()


def compile_selector(expression: str) -> CompiledSelector:
    """Compile (or fetch from the LRU cache) a DRA CEL selector expression."""
    with _lock:
        hit = _cache.get(expression)
    if hit is None:
        try:
            hit = compile_uncached(expression)
        except CelCompileError as exc:
            hit = str(exc)
        with _lock:
            _cache[expression] = hit
    if isinstance(hit, str):
        raise CelCompileError(hit)
    return hit


def compile_uncached(expression: str) -> CompiledSelector:
    """Compile without the cache (benchmarks measure this); raises CelCompileError."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(f"compilation failed: expression exceeds the maximum length of "
                              f"{MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = parse(expression)
        compiled = Compiler().compile(tree)
    except CelSyntaxError as exc:
        raise CelCompileError(_located(expression, exc.pos, exc.message)) from None
    except CheckError as exc:
        if exc.pos is None:
            raise CelCompileError(exc.message) from None
        raise CelCompileError(_located(expression, exc.pos, exc.message)) from None
    except RecursionError:
        raise CelCompileError("compilation failed: expression nesting is too deep") from None
    except (TypeError, ValueError, AttributeError, LookupError, ArithmeticError) as exc:
        # A constant the compiler folded into a shape it did not foresee: the
        # selector is refused with the reason rather than crash its caller.
        raise CelCompileError(f"compilation failed: internal error: {type(exc).__name__}: "
                              f"{exc}") from None
    if compiled.type.name not in ("bool", "dyn"):
        raise CelCompileError(
            f"must evaluate to bool or the unknown type, not {compiled.type}")
    return CompiledSelector(expression, compiled.fn, footprint(tree))


def _located(expression: str, pos: int, message: str) -> str:
    """cel-go's issue format: `ERROR: <input>:line:col: msg` plus a caret excerpt."""
    line_no = expression.count("\n", 0, pos) + 1
    line_start = expression.rfind("\n", 0, pos) + 1
    line_end = expression.find("\n", pos)
    line_text = expression[line_start:line_end if line_end >= 0 else len(expression)]
    col = pos - line_start
    return (f"compilation failed: ERROR: <input>:{line_no}:{col + 1}: {message}\n"
            f" | {line_text}\n | {'.' * col}^")
