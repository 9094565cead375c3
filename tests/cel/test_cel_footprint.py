"""What a selector can read of a device, and results shared between devices by it."""

from __future__ import annotations

import re

import pytest

from app.cel import CelEvalError, compile_selector
from app.cel.footprint import Read, footprint
from app.cel.parser import parse
from app.inventory.selectors import SelectorCache
from app.model import AttributeValue, Device, DeviceCapacity, parse_quantity


def gpu(name: str, *, capacity: str = "40Gi", **attributes: AttributeValue) -> Device:
    attrs = {"gpu.example.com/uuid": AttributeValue("string", f"GPU-{name}"),
             "gpu.example.com/model": AttributeValue("string", "a100")}
    attrs.update({f"gpu.example.com/{k}": v for k, v in attributes.items()})
    return Device(driver="gpu.example.com", pool="p", name=name, slice_name="s",
                  attributes=attrs,
                  capacity={"gpu.example.com/memory": DeviceCapacity(parse_quantity(capacity))})


@pytest.mark.parametrize(("expression", "reads"), [
    ("device.driver == 'x'", ()),
    ("device.attributes['gpu.example.com'].model == 'a100'",
     (Read("attributes", "gpu.example.com/model"),)),
    ("has(device.attributes.dom.x) && device.capacity['d'].?mem.orValue(quantity('1')) "
     "> quantity('0')",
     (Read("attributes", "dom/x"), Read("capacity", "d/mem"))),
    ("device.attributes['d']['y'] == 1", (Read("attributes", "d/y"),)),
    ("'x' in device.attributes['d']", (Read("attributes", "d", whole_domain=True),)),
])
def test_constant_accesses_are_listed(expression: str, reads: tuple[Read, ...]) -> None:
    assert footprint(parse(expression)) == reads


@pytest.mark.parametrize("expression", [
    "device.attributes.exists(d, d == 'x')",
    "cel.bind(d, device, d.driver == 'x')",
    "device.attributes[device.driver].x == 1",
    "[device][0].driver == 'x'",
])
def test_other_uses_of_device_are_unknown(expression: str) -> None:
    assert footprint(parse(expression)) is None


def test_projection_ignores_what_the_expression_cannot_read() -> None:
    selector = compile_selector("device.attributes['gpu.example.com'].model == 'a100'")
    assert selector.projection(gpu("a")) == selector.projection(gpu("b"))
    assert selector.projection(gpu("a")) != selector.projection(
        gpu("c", model=AttributeValue("string", "h100")))
    by_uuid = compile_selector("device.attributes['gpu.example.com'].uuid == 'GPU-a'")
    assert by_uuid.projection(gpu("a")) != by_uuid.projection(gpu("b"))
    by_capacity = compile_selector(
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('40Gi')) >= 0")
    assert by_capacity.projection(gpu("a")) != by_capacity.projection(gpu("b", capacity="20Gi"))


def test_shared_results_follow_the_values_read() -> None:
    cache = SelectorCache()
    model = "device.attributes['gpu.example.com'].model == 'a100'"
    uuid = "device.attributes['gpu.example.com'].uuid == 'GPU-b'"
    assert cache.selector_matches(model, gpu("a")) is True
    assert cache.selector_matches(model, gpu("b")) is True
    assert cache.selector_matches(model, gpu("c", model=AttributeValue("string", "h100"))) is False
    assert cache.selector_matches(uuid, gpu("a")) is False
    assert cache.selector_matches(uuid, gpu("b")) is True


def test_a_device_that_cannot_be_converted_does_not_borrow_a_result() -> None:
    cache = SelectorCache()
    model = "device.attributes['gpu.example.com'].model == 'a100'"
    assert cache.selector_matches(model, gpu("a")) is True
    broken = gpu("b", driverVersion=AttributeValue("version", "not-a-version"))
    with pytest.raises(CelEvalError, match=re.escape("gpu.example.com/p/b")):
        cache.selector_matches(model, broken)
