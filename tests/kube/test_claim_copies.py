"""The binder's claim copies: only unallocated claims, each editable on its own."""

from __future__ import annotations

from typing import Any

from app.binder import ClaimCopies


def raw(name: str, *, uid: str = "", allocated: bool = False, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": uid or name,
                                        "resourceVersion": "1", **meta},
                           "spec": {"devices": {"requests": []}}}
    if allocated:
        obj["status"] = {"allocation": {"devices": {"results": []}}}
    return obj


def test_only_unallocated_live_claims_are_held() -> None:
    copies = ClaimCopies()
    copies.on_change("ResourceClaim", "ADDED", raw("a"))
    copies.on_change("ResourceClaim", "ADDED", raw("b"))
    copies.on_change("ResourceClaim", "ADDED", raw("c"))
    copies.on_change("Pod", "ADDED", raw("p"))
    assert copies.get("ns/a") is not None and copies.get("ns/p") is None
    copies.on_change("ResourceClaim", "MODIFIED", raw("a", allocated=True))
    copies.on_change("ResourceClaim", "DELETED", raw("b"))
    copies.on_change("ResourceClaim", "MODIFIED",
                     raw("c", deletionTimestamp="2026-12-04T00:00:00Z"))
    assert (copies.get("ns/a"), copies.get("ns/b"), copies.get("ns/c")) == (None, None, None)


def test_a_relist_drops_every_copy() -> None:
    copies = ClaimCopies()
    copies.on_change("ResourceClaim", "ADDED", raw("a"))
    copies.on_change("ResourceClaim", "LIST", None)
    assert len(copies) == 0


def test_a_copy_of_another_uid_is_not_given() -> None:
    copies = ClaimCopies()
    copies.on_change("ResourceClaim", "ADDED", raw("a", uid="u1"))
    assert copies.get("ns/a", uid="u2") is None
    assert copies.get("ns/a", uid="u1") is not None


def test_edits_of_a_copy_leave_the_held_one_alone() -> None:
    copies = ClaimCopies()
    copies.on_change("ResourceClaim", "ADDED", raw("a"))
    mine = copies.get("ns/a")
    assert mine is not None
    mine["metadata"]["finalizers"] = ["x"]
    mine["status"]["reservedFor"] = [{"name": "p"}]
    again = copies.get("ns/a")
    assert again is not None
    assert "finalizers" not in again["metadata"] and again["status"] == {}


def test_the_oldest_copy_goes_past_capacity() -> None:
    copies = ClaimCopies(capacity=2)
    for name in ("a", "b", "c"):
        copies.on_change("ResourceClaim", "ADDED", raw(name))
    assert len(copies) == 2 and copies.get("ns/a") is None
