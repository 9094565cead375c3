from app.sources.kube.watch import pod_uses_claims
from loadtest.bench_pods import make_pod, run


def test_the_pod_memory_benchmark_holds_every_pod_with_claims_and_less_than_raw() -> None:
    result = run(200)
    assert result["held"] == 200 and result["counted"] == 200
    assert 0 < result["inventoryMiBPer10000"] < result["rawMiBPer10000"]
    assert result["noClaimsMiBPer10000"] < result["inventoryMiBPer10000"] / 3


def test_generated_pods_with_and_without_claims() -> None:
    assert pod_uses_claims(make_pod(1))
    assert not pod_uses_claims(make_pod(1, claims=False))
