"""TopologyConfig.from_dict: defaults, overrides, clear errors on bad input."""

from __future__ import annotations

import pytest

from app.topology import TopologyConfig


def test_defaults_and_empty_section() -> None:
    config = TopologyConfig.from_dict({})
    assert config == TopologyConfig() == TopologyConfig.from_dict(None)
    assert config.packing == "binpack"
    assert "resource.kubernetes.io/numaNode" in config.numa_attributes
    assert "dra.net/numaNode" in config.numa_attributes


def test_overrides() -> None:
    config = TopologyConfig.from_dict({"packing": "spread",
                                       "weights": {"locality": 2, "packing": 0.5},
                                       "nic_drivers": ["sriov.example.com"]})
    assert (config.packing, config.locality_weight, config.packing_weight) == ("spread", 2, 0.5)
    assert config.nic_drivers == ("sriov.example.com",)


@pytest.mark.parametrize(("raw", "message"), [
    ({"packing": "tight"}, "topology.packing"),
    ({"weights": {"locality": -1}}, "locality must be >= 0"),
    ({"weights": {"locality": 0, "packing": 0}}, "cannot both be 0"),
    ({"weights": {"locality": "high"}}, "topology.weights.locality"),
    ({"weights": {"speed": 1}}, "unknown key"),
    ({"numa_attributes": "dra.net/numaNode"}, "topology.numa_attributes"),
    ({"numa": []}, "unknown key"),
    (["binpack"], "expected a mapping"),
])
def test_bad_input_is_a_clear_error(raw: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TopologyConfig.from_dict(raw)  # type: ignore[arg-type]
