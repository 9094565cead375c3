"""The Helm chart, rendered by the real helm CLI and checked by the real control plane.

For the defaults and each value group of tests/e2e/chart.py: `helm lint
--strict`, `helm template`, and what each group must change in the objects;
every rendered object passes a server-side dry run (dryRun=All, Strict field
validation) on the real API server, with the upstream CRDs of
prometheus-operator and cert-manager (tests/e2e/crds) installed; the pod
passes the `restricted` Pod Security level; the rendered scheduler
configuration and kube-scheduler flags run the real kube-scheduler under the
chart's own RBAC until it holds the chart's Lease. The defaults equal the plain
manifests: the chart renders the same scheduler configuration, rules,
dashboards and RBAC rules from the same files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tarfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import yaml

from app.cli import build_parser
from app.cli.serve import settings_from
from loadtest.bench import free_port
from tests.e2e.build import control_plane_bins, go_available
from tests.e2e.chart import (
    CHART,
    CRDS,
    REPO,
    VALUE_GROUPS,
    HelmError,
    container,
    helm,
    lint,
    one,
    render,
    scheduler_config,
)
from tests.e2e.cluster import Cluster, write_kubeconfig
from tests.e2e.kube import ApiError, Kube, load_documents, wait_for

pytestmark = pytest.mark.skipif(not go_available(),
                                reason="helm is built from its Go module: `go` is not on PATH")

MANIFESTS: Final = REPO / "manifests"
# Objects `helm template` prints per value group (defaults: 16).
EXPECTED_COUNTS: Final = {
    "defaults": 16, "mode-advisor": 16, "one-replica": 15, "tls-cert-manager": 21,
    "tls-issuer-ref": 18, "tls-existing-secret": 16, "metrics-off": 13, "metrics-labels": 16,
    "node-pool-off": 16, "node-pool-custom": 16, "placement": 16, "flags-images-names": 16,
    "pdb-and-network-policy-off": 14, "network-policy-from": 16,
}
RESTRICTED: Final = {"runAsNonRoot": True, "allowPrivilegeEscalation": False,
                     "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                     "seccompProfile": {"type": "RuntimeDefault"}}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for group, values in VALUE_GROUPS.items():
        out[group] = render(values, tmp_path_factory.mktemp(f"helm-{group}"),
                            release=release_name(group))
    return out


def release_name(group: str) -> str:
    return "drax-scheduler" if group == "defaults" else f"drax-{group}"[:53]


def plain(path: str) -> list[dict[str, Any]]:
    return list(load_documents(MANIFESTS / path))


@pytest.mark.parametrize("group", list(VALUE_GROUPS))
def test_helm_lint_strict(group: str, tmp_path: Path) -> None:
    assert "0 chart(s) failed" in lint(VALUE_GROUPS[group], tmp_path)


def test_rendered_object_count_per_value_group(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    counts = {group: len(docs) for group, docs in rendered.items()}
    print(json.dumps(counts))
    assert counts == EXPECTED_COUNTS


@pytest.mark.parametrize("group", list(VALUE_GROUPS))
def test_every_container_is_restricted_and_drax_parses_its_args(
        group: str, rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered[group]
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"]:
        assert c["securityContext"] == RESTRICTED, c["name"]
        assert c["resources"]["requests"] and c["resources"]["limits"], c["name"]
    args = container(docs, "drax")["args"]
    # Settings check the certificate files exist; the TLS test below checks their mounts.
    tls_args = [a for a in args if a.startswith(("--tls-", "--client-ca-file"))]
    settings = settings_from(build_parser().parse_args([a for a in args if a not in tls_args]))
    config = scheduler_config(docs, release_name(group))
    (extender,) = config["extenders"]
    scheme = "https" if tls_args else "http"
    assert extender["urlPrefix"] == (
        f"{scheme}://{settings.host}:{settings.port}{settings.url_prefix}")
    assert settings.host == "127.0.0.1" and settings.metrics_host == "0.0.0.0"
    (port,) = container(docs, "drax")["ports"]
    assert port["containerPort"] == settings.metrics_port
    assert settings.mode == VALUE_GROUPS[group].get("mode", "allocator")
    lease = config["leaderElection"]
    assert settings.leader_election_lease == (
        f"{lease['resourceNamespace']}/{lease['resourceName']}")


def test_defaults_equal_the_plain_manifests(rendered: dict[str, list[dict[str, Any]]]
                                            ) -> None:
    docs = rendered["defaults"]
    deployment = plain("deployment.yaml")
    plain_config = yaml.safe_load(one(deployment, "ConfigMap")["data"]["scheduler-config.yaml"])
    assert scheduler_config(docs) == plain_config == yaml.safe_load(
        (MANIFESTS / "kube-scheduler" / "scheduler-config.yaml").read_text())
    chart_pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    plain_pod = one(deployment, "Deployment")["spec"]["template"]["spec"]
    assert one(docs, "Deployment")["spec"]["replicas"] == 2
    assert one(deployment, "Deployment")["spec"]["replicas"] == 2
    assert chart_pod["securityContext"] == plain_pod["securityContext"]
    for name in ("kube-scheduler", "drax"):
        (chart_c,) = (c for c in chart_pod["containers"] if c["name"] == name)
        (plain_c,) = (c for c in plain_pod["containers"] if c["name"] == name)
        for key in ("command", "resources", "securityContext", "livenessProbe",
                    "readinessProbe", "ports", "env"):
            assert chart_c.get(key) == plain_c.get(key), (name, key)
        if name == "drax":
            parse = build_parser().parse_args
            assert (settings_from(parse(chart_c["args"]))
                    == settings_from(parse(plain_c["args"])))
            assert chart_c["image"] == plain_c["image"] == "drax:0.1.0"
        else:
            assert chart_c["image"] == plain_c["image"]
    rbac = plain("rbac.yaml")
    assert one(docs, "ClusterRole")["rules"] == one(rbac, "ClusterRole")["rules"]
    assert one(docs, "Role")["rules"] == one(rbac, "Role")["rules"]
    chart_refs = sorted(d["roleRef"]["name"] for d in docs if d["kind"].endswith("Binding"))
    plain_refs = sorted(d["roleRef"]["name"] for d in rbac if d["kind"].endswith("Binding"))
    assert [r.replace("drax-scheduler", "drax") for r in chart_refs] == [
        r.replace("drax-scheduler", "drax") for r in plain_refs]
    rule = one(docs, "PrometheusRule")
    assert rule["spec"] == one(plain("prometheus/drax-prometheusrule.yaml"),
                               "PrometheusRule")["spec"]
    dashboards = one(docs, "ConfigMap", "drax-scheduler-dashboards")
    assert {k: json.loads(v) for k, v in dashboards["data"].items()} == {
        p.name: json.loads(p.read_text())
        for p in sorted((MANIFESTS / "grafana" / "dashboards").glob("*.json"))}
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        assert one(docs, kind)["spec"].keys() == one(deployment, kind)["spec"].keys()
    assert one(docs, "NetworkPolicy")["spec"]["ingress"] == one(
        deployment, "NetworkPolicy")["spec"]["ingress"]


def test_each_value_group_changes_what_it_names(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    kinds = {g: Counter(d["kind"] for d in docs) for g, docs in rendered.items()}
    # mode
    advisor = scheduler_config(rendered["mode-advisor"], release_name("mode-advisor"))
    assert "plugins" not in advisor["profiles"][0]
    assert "percentageOfNodesToScore" not in advisor["profiles"][0]
    assert "bindVerb" not in advisor["extenders"][0]
    # replicas
    assert one(rendered["one-replica"], "Deployment")["spec"]["replicas"] == 1
    assert kinds["one-replica"]["PodDisruptionBudget"] == 0
    assert kinds["pdb-and-network-policy-off"]["PodDisruptionBudget"] == 0
    assert kinds["pdb-and-network-policy-off"]["NetworkPolicy"] == 0
    # TLS: each file the configuration and the flags name is in a mounted Secret
    for group, secrets in (("tls-cert-manager", ("drax-tls-cert-manager-serving",
                                                 "drax-tls-cert-manager-client")),
                           ("tls-existing-secret", ("drax-serving", "drax-scheduler-client"))):
        docs = rendered[group]
        (extender,) = scheduler_config(docs, release_name(group))["extenders"]
        assert extender["enableHTTPS"] is True and extender["urlPrefix"].startswith("https://")
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        volumes = {v["name"]: v.get("secret", {}).get("secretName") for v in pod["volumes"]}
        drax_args = container(docs, "drax")["args"]
        files = {"kube-scheduler": [extender["tlsConfig"][k]
                                    for k in ("caFile", "certFile", "keyFile")],
                 "drax": [a.split("=", 1)[1] for a in drax_args
                          if a.startswith(("--tls-", "--client-ca-file"))]}
        for name, paths in files.items():
            assert len(paths) == 3, (group, name, paths)
            mounts = {m["mountPath"]: volumes[m["name"]]
                      for m in container(docs, name)["volumeMounts"]}
            for path in paths:
                assert mounts.get(str(Path(path).parent)) in secrets, (group, name, path)
    assert kinds["tls-cert-manager"]["Certificate"] == 3
    assert kinds["tls-cert-manager"]["Issuer"] == 2
    issuer_ref = VALUE_GROUPS["tls-issuer-ref"]["tls"]["certManager"]["issuerRef"]
    certs = [d for d in rendered["tls-issuer-ref"] if d["kind"] == "Certificate"]
    assert len(certs) == 2 and all(c["spec"]["issuerRef"] == issuer_ref for c in certs)
    # metrics
    for kind in ("ServiceMonitor", "PrometheusRule"):
        assert kinds["metrics-off"][kind] == 0
    assert not [d for d in rendered["metrics-off"] if d["metadata"]["name"].endswith(
        "dashboards")]
    labelled = rendered["metrics-labels"]
    assert one(labelled, "ServiceMonitor")["metadata"]["labels"]["release"] == "prom"
    assert one(labelled, "ServiceMonitor")["spec"]["endpoints"][0]["interval"] == "15s"
    assert one(labelled, "PrometheusRule")["metadata"]["labels"]["release"] == "prom"
    assert one(labelled, "Service")["spec"]["ports"][0]["port"] == 9191
    assert 9191 in [p["port"] for p in one(labelled, "NetworkPolicy")["spec"]["ingress"][0][
        "ports"]]
    # node pool
    assert "pluginConfig" not in scheduler_config(
        rendered["node-pool-off"], release_name("node-pool-off"))["profiles"][0]
    custom = scheduler_config(rendered["node-pool-custom"], release_name("node-pool-custom"))
    (term,) = custom["profiles"][0]["pluginConfig"][0]["args"]["addedAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "example.com/gpu-scheduler",
                                          "operator": "In", "values": ["drax"]}]}
    # placement of the scheduler pods
    placed = one(rendered["placement"], "Deployment")["spec"]["template"]["spec"]
    for key in ("nodeSelector", "tolerations", "affinity"):
        assert placed[key] == VALUE_GROUPS["placement"][key]
    # flags, images, names
    docs = rendered["flags-images-names"]
    values = VALUE_GROUPS["flags-images-names"]
    config = scheduler_config(docs, release_name("flags-images-names"))
    assert config["profiles"][0]["schedulerName"] == "gpu-scheduler"
    assert config["leaderElection"]["resourceName"] == "gpu-scheduler"
    assert config["extenders"][0]["urlPrefix"] == "http://127.0.0.1:8899/scheduler"
    drax = container(docs, "drax")
    assert drax["image"] == "registry.example.com/drax:0.1.0-rc1"
    assert drax["resources"] == values["drax"]["resources"]
    settings = settings_from(build_parser().parse_args(drax["args"]))
    assert settings.verb_deadline == 3
    assert {"name": "DRAX_LOG_LEVEL", "value": "debug"} in drax["env"]
    assert {"name": "DRAX_SCHEDULER_NAME", "value": "gpu-scheduler"} in drax["env"]
    scheduler = container(docs, "kube-scheduler")
    assert scheduler["image"] == "registry.example.com/kube-scheduler:v1.36.4"
    assert scheduler["command"][-2:] == ["--v=4", "--kube-api-qps=100"]
    role = one(docs, "Role")
    assert ["gpu-scheduler"] in [r.get("resourceNames") for r in role["rules"]]
    peers = one(rendered["network-policy-from"], "NetworkPolicy")["spec"]["ingress"][0]["from"]
    assert peers == VALUE_GROUPS["network-policy-from"]["networkPolicy"]["from"]


def test_the_packaged_chart_carries_the_linked_files_and_renders_the_same(
        rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    helm("package", str(CHART), "--destination", str(tmp_path))
    (archive,) = tmp_path.glob("drax-*.tgz")
    with tarfile.open(archive) as tar:
        names = set(tar.getnames())
    assert {"drax/files/rbac.yaml", "drax/files/rules/drax-rules.yaml",
            "drax/files/kube-scheduler/scheduler-config.yaml"} <= names
    assert "drax/files/rules/drax-rules.test.yaml" not in names
    out = helm("template", "drax-scheduler", str(archive), "--namespace", "kube-system")
    assert [d for d in yaml.safe_load_all(out) if d] == rendered["defaults"]


@pytest.mark.parametrize(("values", "message"), [
    ({"mode": "scheduler"}, "at '/mode': value must be one of 'allocator', 'advisor'"),
    ({"replicaCount": 0}, "at '/replicaCount': minimum: got 0, want 1"),
    ({"drax": {"resources": {"limits": None}}},  # null drops the default
     "at '/drax/resources': missing property 'limits'"),
    ({"tls": {"enabled": True, "certManager": {"enabled": False}}},
     "tls.enabled needs tls.certManager.enabled or both tls.existingSecret"),
])
def test_bad_values_fail_with_a_message(values: dict[str, Any], message: str,
                                        tmp_path: Path) -> None:
    with pytest.raises(HelmError, match=message):
        render(values, tmp_path)


# --- on the real control plane ---------------------------------------------------------

PSA_NAMESPACE: Final = "helm-restricted"
CHECK_NAMESPACE: Final = "helm-check"


def ensure(kube: Kube, obj: dict[str, Any]) -> None:
    try:
        kube.create(obj)
    except ApiError as exc:
        if exc.status != 409:
            raise


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    """The upstream CRDs the chart's objects need, established; the namespaces the tests use."""
    kube = cluster.kube()
    try:
        names = []
        for path in sorted(CRDS.glob("*.yaml")):
            for crd in load_documents(path):
                ensure(kube, crd)
                names.append(crd["metadata"]["name"])
        for name in names:
            wait_for(f"CRD {name} Established", lambda n=name: any(
                c["type"] == "Established" and c["status"] == "True" for c in (kube.get(
                    "CustomResourceDefinition", n).get("status") or {}).get("conditions")
                or []))
        ensure(kube, {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "monitoring"}})
        ensure(kube, {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": CHECK_NAMESPACE}})
        ensure(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": PSA_NAMESPACE, "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest"}}})
        wait_for(f"ServiceAccount {PSA_NAMESPACE}/default",
                 lambda: kube.get("ServiceAccount", "default", PSA_NAMESPACE))
    finally:
        kube.close()


def dry_run_all(kube: Kube, docs: list[dict[str, Any]], *, exists_ok: bool) -> list[str]:
    """Dry-run every object; return the rejections (409 AlreadyExists counts as passed
    with `exists_ok`: the API server decides it after validation and admission)."""
    rejected = []
    for doc in docs:
        try:
            kube.create(doc, dry_run=True)
        except ApiError as exc:
            if not (exists_ok and exc.status == 409):
                rejected.append(f"{doc['kind']} {doc['metadata']['name']}: {exc}")
    return rejected


@pytest.mark.parametrize("group", list(VALUE_GROUPS))
def test_every_rendered_object_passes_a_strict_server_side_dry_run(
        group: str, rendered: dict[str, list[dict[str, Any]]], crds: None, kube: Kube) -> None:
    # The defaults' release has the plain manifests' names, which the harness created.
    assert dry_run_all(kube, rendered[group], exists_ok=group == "defaults") == []


def test_the_strict_dry_run_refuses_an_unknown_field(
        rendered: dict[str, list[dict[str, Any]]], crds: None, kube: Kube) -> None:
    for kind in ("Deployment", "ServiceMonitor"):
        doc = json.loads(json.dumps(one(rendered["mode-advisor"], kind)))
        doc["spec"]["replica"] = 2
        with pytest.raises(ApiError) as refused:
            kube.create(doc, dry_run=True)
        assert refused.value.status == 400, kind
        assert "unknown field" in str(refused.value) and "spec.replica" in str(refused.value)


def test_every_plain_manifest_folder_passes_a_strict_server_side_dry_run(
        crds: None, kube: Kube) -> None:
    """`kubectl apply -f` of manifests/, prometheus/, grafana/ and tls/: only API objects."""
    checked = 0
    for folder in ("", "prometheus", "grafana", "tls"):
        for path in sorted((MANIFESTS / folder).glob("*.yaml")):
            docs = list(load_documents(path))
            assert all({"apiVersion", "kind", "metadata"} <= d.keys() for d in docs), path
            assert dry_run_all(kube, docs, exists_ok=True) == [], path
            checked += len(docs)
    assert checked >= 20


def pod_from(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    spec = dict(deployment["spec"]["template"]["spec"])
    # Pod Security does not look at these; the namespace has neither the account nor
    # the right to system-cluster-critical.
    spec.pop("priorityClassName", None)
    spec["serviceAccountName"] = "default"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": PSA_NAMESPACE}, "spec": spec}


def test_the_pods_pass_the_restricted_pod_security_level(
        rendered: dict[str, list[dict[str, Any]]], crds: None, kube: Kube) -> None:
    deployments = {"plain": one(plain("deployment.yaml"), "Deployment"),
                   **{g: one(rendered[g], "Deployment")
                      for g in ("defaults", "tls-cert-manager", "placement")}}
    for name, deployment in deployments.items():
        kube.create(pod_from(deployment, f"psa-{name}"), dry_run=True)
    # The same check refuses a container without the hardening.
    weak = pod_from(deployments["defaults"], "psa-weak")
    weak["spec"]["containers"] = [{k: v for k, v in c.items() if k != "securityContext"}
                                  for c in weak["spec"]["containers"]]
    with pytest.raises(ApiError) as refused:
        kube.create(weak, dry_run=True)
    assert refused.value.status == 403 and "PodSecurity" in str(refused.value)


@pytest.fixture(scope="module")
def bins() -> dict[str, Path]:
    return control_plane_bins()


def service_account_kubeconfig(cluster: Cluster, kube: Kube, namespace: str, name: str,
                               path: Path) -> Path:
    token = kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})["status"]["token"]
    write_kubeconfig(path, server=cluster.server, ca=cluster.path / "pki" / "ca.crt",
                     user={"token": token})
    return path


@pytest.fixture()
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("group", ["defaults", "mode-advisor", "tls-cert-manager"])
def test_the_real_kube_scheduler_runs_the_rendered_configuration_under_the_chart_rbac(
        group: str, cluster: Cluster, crds: None, kube: Kube, bins: dict[str, Path],
        tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    """The chart's objects in their own namespace, with a scheduler name and Lease of their
    own (so the e2e pods stay with the harness's schedulers): kube-scheduler, as the
    chart's ServiceAccount and with the chart's flags, must load the configuration, take
    the Lease and stay healthy without a forbidden request."""
    release = f"check-{group}"
    values = {**VALUE_GROUPS[group], "schedulerName": f"helm-{group}",
              "leaderElection": {"leaseName": f"helm-{group}"}}
    docs = render(values, tmp_path, release=release, namespace=CHECK_NAMESPACE)
    for doc in docs:
        if doc["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                           "RoleBinding"):
            ensure(kube, doc)
    kubeconfig = service_account_kubeconfig(cluster, kube, CHECK_NAMESPACE, release,
                                            tmp_path / "kubeconfig")
    config = scheduler_config(docs, release)
    # In a pod kube-scheduler uses the in-cluster config and the mounted Secrets.
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    pki = cluster.path / "pki"
    for extender in config["extenders"]:
        if "tlsConfig" in extender:
            extender["tlsConfig"].update(caFile=str(pki / "ca.crt"),
                                         certFile=str(pki / "admin.crt"),
                                         keyFile=str(pki / "admin.key"))
    config_path = tmp_path / "scheduler-config.yaml"
    config_path.write_text(yaml.safe_dump(config))
    command = container(docs, "kube-scheduler")["command"]
    assert command[0] == "kube-scheduler"
    port = free_port()
    log = tmp_path / "kube-scheduler.log"
    with log.open("wb") as out:
        started.append(subprocess.Popen(
            [str(bins["kube-scheduler"]), f"--config={config_path}",
             "--bind-address=127.0.0.1", f"--secure-port={port}",
             f"--authentication-kubeconfig={kubeconfig}",
             f"--authorization-kubeconfig={kubeconfig}",
             *(a for a in command[1:] if not a.startswith("--config="))],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
    proc = started[-1]

    def running(check: Any) -> Any:
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        return check()

    wait_for(f"{release} holds Lease {CHECK_NAMESPACE}/helm-{group}", lambda: running(
        lambda: kube.get("Lease", f"helm-{group}", CHECK_NAMESPACE)["spec"].get(
            "holderIdentity")), timeout=60)
    wait_for(f"{release} /healthz", lambda: running(lambda: httpx.get(
        f"https://127.0.0.1:{port}/healthz", verify=False, timeout=5).status_code == 200))
    time.sleep(2)  # the informers' first lists after the lease
    assert proc.poll() is None
    text = log.read_text(errors="replace")
    assert "forbidden" not in text.lower(), text[-3000:]
    assert f'"helm-{group}"' in text or f"helm-{group}" in text
