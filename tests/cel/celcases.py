"""Shared helpers for the CEL tables: a device built through the real model parser,
and the expected-outcome markers (`Compile`, `Runtime`) the tables use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.cel import CelCompileError, CelEvalError, compile_selector
from app.model import Device, parse_object

DRIVER = "dra.example.com"


@dataclass(frozen=True)
class Compile:
    """The expression must fail to compile with a message containing `text`."""

    text: str


@dataclass(frozen=True)
class Runtime:
    """Evaluation must fail with a message containing `text`."""

    text: str


def make_device(attributes: dict[str, dict[str, Any]] | None = None,
                capacity: dict[str, str] | None = None, *, driver: str = DRIVER,
                name: str = "dev-0", allow_multiple: bool = False) -> Device:
    raw_device: dict[str, Any] = {"name": name}
    if attributes:
        raw_device["attributes"] = attributes
    if capacity:
        raw_device["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if allow_multiple:
        raw_device["allowMultipleAllocations"] = True
    slice_obj = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "slice-0"},
        "spec": {"driver": driver, "nodeName": "node-0",
                 "pool": {"name": "pool-0", "generation": 1, "resourceSliceCount": 1},
                 "devices": [raw_device]},
    }
    return parse_object("ResourceSlice", slice_obj).devices[0]  # type: ignore[no-any-return]


STANDARD_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "bool": {"bool": True},
    "int": {"int": 1},
    "neg": {"int": -5},
    "string": {"string": "fish"},
    "version": {"version": "1.0.0"},
    "ints": {"ints": [1, 2, 3]},
    "bools": {"bools": [True, False]},
    "strings": {"strings": ["fish", "bird"]},
    "versions": {"versions": ["1.0.0", "2.0.0"]},
    "productName": {"string": "NVIDIA H100 80GB HBM3"},
    "services": {"string": "some_example_value"},
    "asym": {"string": "asymetric"},
    "other.example.com/name": {"bool": True},
    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
}
STANDARD_CAPACITY = {"memory": "80Gi", "cores": "1500m", "small": "1Mi",
                     "other.example.com/slots": "4"}

STANDARD_DEVICE = make_device(STANDARD_ATTRIBUTES, STANDARD_CAPACITY)


def check(expression: str, expected: Any, device: Device = STANDARD_DEVICE) -> None:
    """Compile and evaluate `expression`, asserting the table's expected outcome."""
    if isinstance(expected, Compile):
        try:
            compile_selector(expression)
        except CelCompileError as exc:
            assert expected.text in str(exc), str(exc)
            return
        raise AssertionError(f"expected compile error {expected.text!r}")
    selector = compile_selector(expression)
    if isinstance(expected, Runtime):
        try:
            result = selector.matches(device)
        except CelEvalError as exc:
            assert expected.text in str(exc), str(exc)
            return
        raise AssertionError(f"expected runtime error {expected.text!r}, got {result!r}")
    assert selector.matches(device) is expected
