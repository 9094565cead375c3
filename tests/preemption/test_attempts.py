"""A nominated preemptor's scheduling attempts, told apart from its filters.

kube-scheduler tries a nominated pod on its nominated node alone first, and
filters the other nodes in the same attempt only when that node is refused:
one attempt is then two filters. `Attempts` groups them so.
"""

from __future__ import annotations

from app.preemption.attempts import Attempts, nominated_alone

POD, UID = "default/p", "uid-p"


def filters(ledger: Attempts, calls: list[tuple[list[str], list[str]]],
            nominated: str = "node-a", uid: str = UID) -> list[bool]:
    """Feed (node names, passed) filters of POD; whether each started an attempt."""
    started = []
    for names, passed in calls:
        started.append(ledger.starts_attempt(POD, uid, nominated, names))
        ledger.filtered(POD, uid, nominated, names, passed, started=started[-1])
    return started


def test_a_refused_nominated_node_and_the_other_nodes_after_it_are_one_attempt() -> None:
    ledger = Attempts()
    started = filters(ledger, [
        (["node-a"], []), (["node-a", "node-b"], []),    # attempt 1: refused twice
        (["node-a"], []), (["node-a", "node-b"], []),    # attempt 2
        (["node-a"], ["node-a"])])                        # attempt 3: fits
    assert started == [True, False, True, False, True]


def test_a_nominated_node_that_passes_ends_its_attempt() -> None:
    """After the nominated node passed (and, say, the bind failed), the next
    filter is a new attempt, whatever nodes it lists."""
    ledger = Attempts()
    assert filters(ledger, [(["node-a"], ["node-a"]), (["node-b", "node-c"], [])]) \
        == [True, True]


def test_every_filter_is_an_attempt_when_the_nominated_node_is_not_tried_alone() -> None:
    """Not nominated yet in the scheduler's copy, or its nominated node refused
    by the scheduler's own filters: each filter lists other nodes, one per
    attempt."""
    ledger = Attempts()
    assert filters(ledger, [(["node-a", "node-b"], [])] * 3, nominated="") == [True] * 3
    ledger = Attempts()
    assert filters(ledger, [(["node-b"], []), (["node-b", "node-c"], [])]) == [True, True]


def test_the_nominated_node_alone_again_after_its_refusal_is_the_same_attempt() -> None:
    """The scheduler's second pass filters every node, the nominated one too:
    when only that one passes its own filters (pinned, a one-node pool), drax
    is sent it alone twice in one attempt."""
    ledger = Attempts()
    assert filters(ledger, [(["node-a"], []), (["node-a"], []),
                            (["node-a"], []), (["node-a"], []),
                            (["node-a"], ["node-a"])]) == [True, False, True, False, True]


def test_a_new_pod_of_the_same_name_starts_over() -> None:
    ledger = Attempts()
    filters(ledger, [(["node-a"], [])])
    assert ledger.starts_attempt(POD, "uid-other", "node-a", ["node-a", "node-b"])
    assert not ledger.starts_attempt(POD, UID, "node-a", ["node-a", "node-b"])


def test_pods_whose_nomination_ended_are_forgotten() -> None:
    ledger = Attempts()
    filters(ledger, [(["node-a"], [])])
    ledger.forget(lambda key: key == POD)
    assert len(ledger) == 1
    ledger.forget(lambda key: False)
    assert len(ledger) == 0
    assert ledger.starts_attempt(POD, UID, "node-a", ["node-a", "node-b"])


def test_nominated_alone_needs_a_nomination_and_that_node_only() -> None:
    assert nominated_alone("node-a", ["node-a"])
    assert not nominated_alone("", ["node-a"])
    assert not nominated_alone("node-a", ["node-b"])
    assert not nominated_alone("node-a", ["node-a", "node-b"])
