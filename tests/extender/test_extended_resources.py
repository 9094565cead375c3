"""Extended resources served by DRA (KEP-5004), upstream 1.37 semantics: which
class serves a name, which nodes DRA serves, how containers become requests,
and filter/bind in file mode."""

from __future__ import annotations

from typing import Any

from app.extender.extended import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    extended_claim,
    needs_of,
    resource_classes,
    served_by_dra,
)
from app.features import FeatureGates
from app.model.parse import parse_device_class, parse_node, parse_pod
from tests.extender.cluster import GPU_CLASS, extender, gpu_node, load, the_pod
from tests.inventory.objects import claim, exactly, pod

GPU = "example.com/gpu"
MAPPED_GPU_CLASS = {**GPU_CLASS, "spec": {**GPU_CLASS["spec"], "extendedResourceName": GPU}}


def container(name: str, resources: dict[str, Any] | None = None, *,
              limits: dict[str, Any] | None = None, sidecar: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {}}
    if resources:
        out["resources"]["requests"] = resources
    if limits:
        out["resources"]["limits"] = limits
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


def ext_pod(name: str = "p", *, containers: list[dict[str, Any]],
            init: list[dict[str, Any]] | None = None, **kwargs: Any) -> dict[str, Any]:
    obj = pod(name, **kwargs)
    obj["spec"]["containers"] = containers
    if init:
        obj["spec"]["initContainers"] = init
    return obj


def node(name: str, allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "8", **(allocatable or {})}}}


def cls(name: str, *, extended: str | None = None, created: str = "") -> Any:
    obj: dict[str, Any] = {"kind": "DeviceClass", "metadata": {"name": name}, "spec": {}}
    if extended:
        obj["spec"]["extendedResourceName"] = extended
    if created:
        obj["metadata"]["creationTimestamp"] = created
    return parse_device_class(obj)


# ---------------------------------------------------------------- mapping rules


def test_explicit_and_implicit_names_and_the_newest_class_wins() -> None:
    classes = {c.name: c for c in (
        cls("old", extended=GPU, created="2026-01-01T00:00:00Z"),
        cls("new", extended=GPU, created="2026-02-01T00:00:00Z"),
        cls("b-tie", extended="x.com/y", created="2026-01-01T00:00:00Z"),
        cls("a-tie", extended="x.com/y", created="2026-01-01T00:00:00Z"))}
    mapped = resource_classes(classes)
    assert mapped[GPU].name == "new"
    assert mapped["x.com/y"].name == "a-tie"
    assert mapped["deviceclass.resource.kubernetes.io/old"].name == "old"


def test_requests_default_from_limits_and_non_integers_are_ignored() -> None:
    p = parse_pod(ext_pod(containers=[
        container("a", limits={GPU: "2", "cpu": "1"}),
        container("b", {GPU: "500m", "hugepages-2Mi": "1", "kubernetes.io/x": "1"})]))
    assert p.containers[0].extended == {GPU: 2}
    assert p.containers[0].names == ("cpu", GPU)
    assert p.containers[1].extended == {}


def test_device_plugin_nodes_are_left_to_the_in_tree_fit() -> None:
    classes = {"gpu": cls("gpu", extended=GPU)}
    needs = needs_of(parse_pod(ext_pod(containers=[
        container("a", {GPU: "2", "other.com/thing": "1"})])), classes)
    assert needs is not None
    # advertised non-zero: device plugin; at zero or absent: DRA
    both = parse_node(node("n", {GPU: "4", "other.com/thing": "1"}))
    assert served_by_dra(needs, both) == ()
    zero = parse_node(node("n", {GPU: "0", "other.com/thing": "1"}))
    assert served_by_dra(needs, zero) == (GPU,)
    # an unmapped resource the node lacks rules the node out
    lacking = served_by_dra(needs, parse_node(node("n", {})))
    assert isinstance(lacking, str) and "other.com/thing" in lacking


def test_no_mapped_resource_means_no_extended_needs() -> None:
    p = parse_pod(ext_pod(containers=[container("a", {"other.com/thing": "1"})]))
    assert needs_of(p, {"gpu": cls("gpu", extended=GPU)}) is None


def test_init_and_sidecar_containers_count_as_upstream() -> None:
    # init-0 (2) runs before sidecar init-1 (1) and main (1): it reuses their
    # requests (2 devices) and asks nothing more. init-2 (3) after the sidecar
    # reuses main's 1 and asks 2 more. Short-lived requests collapse to the
    # largest, init-2's.
    p = parse_pod(ext_pod(
        init=[container("init-0", {GPU: "2"}), container("side", {GPU: "1"}, sidecar=True),
              container("init-2", {GPU: "3", "cpu": "1"})],
        containers=[container("main", {GPU: "1"})]))
    classes = {"gpu": cls("gpu", extended=GPU)}
    needs = needs_of(p, classes)
    assert needs is not None
    special = extended_claim(p, needs, (GPU,))
    requests = {r.name: r.exactly.count for r in special.claim.spec.requests if r.exactly}
    assert requests == {"container-1-request-0": 1, "container-2-request-1": 2,
                        "container-3-request-0": 1}
    mappings = {(m.container_name, m.request_name) for m in special.mappings}
    assert mappings == {("side", "container-1-request-0"), ("main", "container-3-request-0"),
                        ("init-0", "container-1-request-0"),
                        ("init-0", "container-3-request-0"),
                        ("init-2", "container-3-request-0"),
                        ("init-2", "container-2-request-1")}
    assert special.claim.annotations == {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"}


# ---------------------------------------------------------------- filter and bind


def cluster(*extra: Any, gpus: int = 2) -> Any:
    return load(MAPPED_GPU_CLASS, node("dra"), *gpu_node("dra", roots=["r0"] * gpus),
                node("plugin", {GPU: "8"}), node("none"), *extra)


def test_filter_serves_dra_nodes_leaves_plugin_nodes_and_names_the_resource() -> None:
    inv = cluster(ext_pod(uid="u", containers=[container("a", {GPU: "2"})]))
    ext = extender(inv, file_mode=True)
    result = ext.filter(the_pod(inv), ["dra", "plugin", "none"])
    assert result.passed == ["dra", "plugin"]
    # no devices at all: DRA cannot serve it there, whatever gets evicted
    assert set(result.unresolvable) == {"none"}
    inv3 = cluster(ext_pod(uid="u", containers=[container("a", {GPU: "3"})]))
    result = extender(inv3, file_mode=True).filter(the_pod(inv3), ["dra", "none"])
    assert result.unresolvable["dra"] == (f"{GPU}: 3 requested, 2 devices of class gpu free "
                                          "on this node")
    assert result.unresolvable["none"] == (f"{GPU}: 3 requested, 0 devices of class gpu "
                                           "free on this node")


def test_extended_resources_and_claims_are_one_allocation() -> None:
    inv = cluster(claim("c", requests=[exactly("g", "gpu")]),
                  ext_pod(uid="u", claims={"g": "c"}, containers=[container("a", {GPU: "2"})]),
                  gpus=3)
    ext = extender(inv, file_mode=True)
    [ev] = ext.evaluate(the_pod(inv), ["dra"])
    assert ev.feasible
    devices = {r.device for ca in ev.claims for r in ca.allocation.results}
    assert devices == {"gpu-0", "gpu-1", "gpu-2"}
    assert [ca.claim_key for ca in ev.claims] == ["default/c", "default/<extended-resources>"]


async def test_file_mode_bind_creates_the_special_claim_and_pod_status() -> None:
    inv = cluster(ext_pod(uid="u", containers=[container("a", {GPU: "2"})]),
                  ext_pod("q", uid="v", containers=[container("a", {GPU: "1"})]))
    ext = extender(inv, file_mode=True)
    ext.filter(the_pod(inv), ["dra"])
    assert await ext.bind(namespace="default", name="p", uid="u", node="dra") is None
    bound = the_pod(inv)
    status = bound.extended_resource_claim_status
    assert bound.node_name == "dra" and status is not None
    assert status.resource_claim_name.startswith("p-extended-resources-")
    assert len(status.resource_claim_name) == len("p-extended-resources-") + 5
    assert [(m.container_name, m.resource_name, m.request_name)
            for m in status.request_mappings] == [("a", GPU, "container-0-request-0")]
    made = inv.claim(f"default/{status.resource_claim_name}")
    assert made is not None and made.allocation is not None
    assert made.owner_pod_uid == "u" and made.annotations[EXTENDED_RESOURCE_CLAIM_ANNOTATION]
    assert [r.uid for r in made.reserved_for] == ["u"]
    assert len(made.allocation.results) == 2
    # both GPUs are now taken: the next pod's request is named in the reason
    other = the_pod(inv, "default/q")
    assert ext.filter(other, ["dra"]).failed["dra"] == (
        f"{GPU}: 1 requested, 0 devices of class gpu free on this node")


def test_gate_off_ignores_extended_resources() -> None:
    inv = cluster(ext_pod(uid="u", containers=[container("a", {GPU: "9"})]))
    ext = extender(inv, file_mode=True,
                   features=FeatureGates().with_overrides({"DRAExtendedResource": False}))
    assert ext.filter(the_pod(inv), ["dra", "none"]).passed == ["dra", "none"]
