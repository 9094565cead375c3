"""A real Kubernetes 1.37 control plane on loopback, with drax scheduling through it.

    python -m tests.e2e.cluster up --dir DIR [--drax-mode allocator|advisor] [--replicas N]
                                   [--profiles NAME[,NAME...]]
    python -m tests.e2e.cluster down --dir DIR

`up` builds (or reuses) the upstream binaries, then starts etcd,
kube-apiserver (client certificates, Node,RBAC), kube-controller-manager,
two kube-schedulers (`default-scheduler` unchanged; `drax` from
manifests/kube-scheduler/scheduler-config.yaml with only the extender URL, the kubeconfig
and the ports adjusted, and with the kube-scheduler flags of
manifests/deployment.yaml) and `drax serve` in kube mode. drax and its scheduler
authenticate as the `drax-scheduler` ServiceAccount with a TokenRequest
token, so the least-privilege RBAC of manifests/rbac.yaml is what runs. It
writes DIR/kubeconfig (cluster admin) and DIR/cluster.json, and exits 0 only
once every component is ready. There is no kubelet: Nodes are API objects
whose status `make_node_ready` patches. Each process runs in its own session
so it outlives `up`; `down` stops them by the PIDs in cluster.json.

`--replicas N` runs N drax pods (kube-scheduler + drax each), as the
Deployment does: the kube-schedulers elect a leader with the Lease
kube-system/drax-scheduler and every drax follows it. kube-scheduler's
identity in the election is `<hostname>_<uuid>` and drax recognises its own
kube-scheduler by the hostname they share, so with N > 1 each replica gets a
UTS namespace with its own hostname `drax-scheduler-<i>`, held by a `pod-<i>`
process (`unshare --uts`, as a pod's sandbox holds it) that both containers
join (`nsenter --uts`). The replicas share the host's network, so each has its
own ports. cluster.json lists them under `schedulers`:
`{"replica": i, "identity": ..., "hostname": ..., "pids": {"kube-scheduler",
"drax"}, "logs": {"kube-scheduler", "drax"}}`; `identity` is the Lease holder
identity of that replica's kube-scheduler once it has been seen holding the
Lease (`note_leader`), and its hostname until then (a standby's uuid is not
visible anywhere). Replica 0's components keep the single-replica names
(`drax`, `drax-scheduler`), replica i's are `drax-<i>`, `drax-scheduler-<i>`.

`--profiles drax,drax-gpu` (`start(profiles=[...])`) gives the drax
kube-scheduler one profile per name, each a copy of the manifest's `drax`
profile, and starts drax with `--scheduler-name` listing them all, as one
kube-scheduler with several profiles calling drax is configured: drax
preempts for the pods of every one of them. Names are read as drax reads its
`scheduler_name` setting (commas, duplicates dropped; default `drax`).

Tests use the same `start`/`stop` in-process (tests/e2e/conftest.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from app.config import FIELDS, ConfigError
from loadtest.bench import free_ports
from tests.e2e.build import control_plane_bins
from tests.e2e.kube import Kube, tls_context, wait_for

REPO: Final = Path(__file__).resolve().parents[2]
MANIFESTS: Final = REPO / "manifests"
SAMPLE_CLASSES: Final = REPO / "app" / "sample" / "00-deviceclasses.yaml"
DRAX_SA: Final = ("kube-system", "drax-scheduler")
LEASE: Final = ("kube-system", "drax-scheduler")
TOKEN_SECONDS: Final = 48 * 3600
READY_TIMEOUT: Final = 120.0
DRAX_POOL_LABEL: Final = ("drax.dev/pool", "drax")


@dataclass(slots=True)
class Cluster:
    dir: str
    drax_mode: str
    server: str
    drax_url: str
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    # drax serves the verbs over HTTPS with client certificates (manifests/tls).
    drax_tls: bool = False
    replicas: int = 1
    # The drax kube-scheduler's profiles (the manifest's `drax`, then copies of
    # it under the other names), all calling drax, which serves every name.
    profiles: list[str] = field(default_factory=lambda: ["drax"])
    # One entry per replica (see the module doc); rebuilt from `pids` on save.
    schedulers: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path(self.dir)

    def kube(self) -> Kube:
        pki = self.path / "pki"
        return Kube(server=self.server, ca=pki / "ca.crt", cert=pki / "admin.crt",
                    key=pki / "admin.key")

    def save(self) -> None:
        self.schedulers = [self._replica_entry(i) for i in range(self.replicas)]
        (self.path / "cluster.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> Cluster:
        return cls(**json.loads((directory / "cluster.json").read_text()))

    def hostname(self, replica: int) -> str:
        return f"drax-scheduler-{replica}" if self.replicas > 1 else socket.gethostname()

    def _replica_entry(self, i: int) -> dict[str, Any]:
        known = self.schedulers[i] if i < len(self.schedulers) else {}
        names = {"kube-scheduler": scheduler_name(i), "drax": drax_name(i)}
        return {"replica": i, "identity": known.get("identity") or self.hostname(i),
                "hostname": self.hostname(i),
                "pids": {role: self.pids.get(name) for role, name in names.items()},
                "logs": {role: self.logs.get(name) for role, name in names.items()}}

    def replica_of(self, holder: str) -> int | None:
        """The replica whose kube-scheduler is Lease holder `holder`."""
        for i in range(self.replicas):
            host = self.hostname(i)
            if holder == host or holder.startswith(host + "_"):
                return i
        return None

    def note_leader(self, kube: Kube) -> int | None:
        """Read the Lease; record its holder as its replica's identity; that replica."""
        namespace, name = LEASE
        holder = kube.get("Lease", name, namespace)["spec"].get("holderIdentity") or ""
        replica = self.replica_of(holder)
        if replica is not None:
            self.schedulers = [self._replica_entry(i) for i in range(self.replicas)]
            self.schedulers[replica]["identity"] = holder
            self.save()
        return replica

    def spawn(self, name: str, argv: list[str]) -> None:
        """Start (or restart) component `name` with `argv`, logging to DIR/logs/<name>.log.
        A replica's kube-scheduler started again has a new identity, not yet known."""
        log_path = self.path / "logs" / f"{name}.log"
        log_path.parent.mkdir(exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    cwd=REPO)
        self.pids[name] = proc.pid
        self.logs[name] = str(log_path)
        self.commands[name] = argv
        for entry in self.schedulers:
            if name == scheduler_name(entry["replica"]):
                entry["identity"] = ""
        self.save()

    def kill(self, name: str, *, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        pid = self.pids.get(name)
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        while _alive(pid):
            time.sleep(0.05)

    def restart(self, name: str, *, sig: int = signal.SIGTERM) -> None:
        self.kill(name, sig=sig)
        self.spawn(name, self.commands[name])

    def alive(self, name: str) -> bool:
        return _alive(self.pids[name])


def _alive(pid: int) -> bool:
    # The children are ours when run in-process: reap them so they do not linger as zombies.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving cert, the admin client cert, the ServiceAccount key."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=drax-e2e-ca", cwd=pki)
    leaves = {"apiserver": ("/CN=kube-apiserver", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
              "admin": ("/O=system:masters/CN=drax-e2e-admin", "extendedKeyUsage=clientAuth")}
    for name, (subject, ext) in leaves.items():
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject, cwd=pki)
        _sign(pki, name, ext)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def _sign(pki: Path, name: str, ext: str) -> None:
    (pki / f"{name}.ext").write_text(ext + "\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-out", f"{name}.crt",
             "-extfile", f"{name}.ext", cwd=pki)


def make_drax_pki(pki: Path) -> None:
    """drax's serving pair, the drax kube-scheduler's client pair (both from the
    e2e CA), and a client pair from another CA that drax must refuse."""
    leaves = {"drax": ("/CN=drax", "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                   "extendedKeyUsage=serverAuth"),
              "drax-client": ("/CN=drax-scheduler", "extendedKeyUsage=clientAuth")}
    for name, (subject, ext) in leaves.items():
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
                 "-out", f"{name}.csr", "-subj", subject, cwd=pki)
        _sign(pki, name, ext)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-keyout", "other-ca.key", "-out", "other-ca.crt", "-subj", "/CN=other-ca",
             cwd=pki)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "stranger.key",
             "-out", "stranger.csr", "-subj", "/CN=drax-scheduler", cwd=pki)
    (pki / "stranger.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", "stranger.csr", "-CA", "other-ca.crt", "-CAkey",
             "other-ca.key", "-CAcreateserial", "-days", "30", "-out", "stranger.crt",
             "-extfile", "stranger.ext", cwd=pki)


def write_kubeconfig(path: Path, *, server: str, ca: Path, user: dict[str, str]) -> None:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
           "clusters": [{"name": "e2e", "cluster": {"server": server,
                                                     "certificate-authority": str(ca)}}],
           "users": [{"name": "e2e", "user": user}],
           "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}]}
    path.write_text(yaml.safe_dump(doc))


def _get_ok(url: str, **kwargs: Any) -> bool:
    return httpx.get(url, timeout=5, **kwargs).status_code == 200


def drax_name(replica: int) -> str:
    return "drax" if replica == 0 else f"drax-{replica}"


def scheduler_name(replica: int) -> str:
    return "drax-scheduler" if replica == 0 else f"drax-scheduler-{replica}"


def drax_url_of(cluster: Cluster, replica: int) -> str:
    if replica == 0:
        return cluster.drax_url
    scheme = "https" if cluster.drax_tls else "http"
    return f"{scheme}://127.0.0.1:{cluster.ports[drax_name(replica)]}"


def drax_scheduler_config(cluster: Cluster, kubeconfig: Path, replica: int = 0
                          ) -> dict[str, Any]:
    """manifests/kube-scheduler/scheduler-config.yaml (scheduler-config-https.yaml with TLS) with
    only the extender URL (replica's own drax), the certificate files and the kubeconfig set,
    and the manifest's profile copied under each further name of `cluster.profiles`."""
    source = "scheduler-config-https.yaml" if cluster.drax_tls else "scheduler-config.yaml"
    config = yaml.safe_load((MANIFESTS / "kube-scheduler" / source).read_text())
    config["clientConnection"] = {"kubeconfig": str(kubeconfig)}
    pki = cluster.path / "pki"
    for extender in config["extenders"]:
        extender["urlPrefix"] = f"{drax_url_of(cluster, replica)}/scheduler"
        if cluster.drax_tls:
            extender["tlsConfig"].update(caFile=str(pki / "ca.crt"),
                                         certFile=str(pki / "drax-client.crt"),
                                         keyFile=str(pki / "drax-client.key"))
    if cluster.drax_mode == "advisor":
        # README "advisor mode": the in-tree plugin allocates and binds; drax filters and scores.
        for profile in config["profiles"]:
            profile.pop("plugins", None)
            profile.pop("percentageOfNodesToScore", None)
        for extender in config["extenders"]:
            extender.pop("bindVerb", None)
    (profile,) = config["profiles"]
    config["profiles"] = [{**copy.deepcopy(profile), "schedulerName": name}
                          for name in cluster.profiles]
    return config


def default_scheduler_config(kubeconfig: Path) -> dict[str, Any]:
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": str(kubeconfig)},
            "leaderElection": {"leaderElect": False}}


def _deployment_container(name: str) -> dict[str, Any]:
    for doc in yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text()):
        if doc and doc["kind"] == "Deployment":
            (container,) = (c for c in doc["spec"]["template"]["spec"]["containers"]
                            if c["name"] == name)
            return dict(container)
    raise RuntimeError("manifests/deployment.yaml has no Deployment")


def drax_scheduler_flags() -> list[str]:
    """The flags manifests/deployment.yaml gives the drax kube-scheduler, but --config."""
    command = _deployment_container("kube-scheduler")["command"]
    return [a for a in command[1:] if not a.startswith("--config=")]


def drax_lease_flags() -> list[str]:
    """The Lease manifests/deployment.yaml tells drax to follow."""
    args = [str(a) for a in _deployment_container("drax")["args"]]
    for i, arg in enumerate(args):
        if arg == "--leader-election-lease":
            return args[i:i + 2]
        if arg.startswith("--leader-election-lease="):
            return [arg]
    return []


def drax_argv(cluster: Cluster, replica: int = 0) -> list[str]:
    argv = [sys.executable, "-m", "app", "serve", "--kubeconfig",
            str(cluster.path / "drax.kubeconfig"),
            "--port", str(cluster.ports[drax_name(replica)]),
            "--mode", cluster.drax_mode, "--scheduler-name", ",".join(cluster.profiles),
            *drax_lease_flags()]
    if cluster.drax_tls:
        pki = cluster.path / "pki"
        argv += ["--tls-cert-file", str(pki / "drax.crt"),
                 "--tls-private-key-file", str(pki / "drax.key"),
                 "--client-ca-file", str(pki / "ca.crt"),
                 "--metrics-port", str(cluster.ports[f"{drax_name(replica)}-metrics"])]
    return argv


def drax_probe_url(cluster: Cluster, replica: int = 0) -> str:
    """Where /readyz answers without a client certificate."""
    if cluster.drax_tls:
        return f"http://127.0.0.1:{cluster.ports[f'{drax_name(replica)}-metrics']}"
    return drax_url_of(cluster, replica)


def _up(cluster: Cluster, name: str, probe: Any) -> Any:
    """`probe()`, but fail at once with the log's tail if component `name` has exited."""
    if not cluster.alive(name):
        tail = Path(cluster.logs[name]).read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{name} exited; last log lines:\n{tail}")
    return probe()


def wait_drax_ready(cluster: Cluster, timeout: float = READY_TIMEOUT, replica: int = 0) -> None:
    name = drax_name(replica)
    wait_for(f"{name} /readyz", lambda: _up(cluster, name, lambda: _get_ok(
        f"{drax_probe_url(cluster, replica)}/readyz")), timeout=timeout)


def wait_apiserver_ready(cluster: Cluster, timeout: float = READY_TIMEOUT) -> None:
    pki = cluster.path / "pki"
    wait_for("kube-apiserver /readyz", lambda: _up(cluster, "kube-apiserver", lambda: _get_ok(
        f"{cluster.server}/readyz", verify=tls_context(
            ca=pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key"))), timeout=timeout)


def start(directory: Path, *, drax_mode: str = "allocator", drax_tls: bool = False,
          replicas: int = 1, profiles: Sequence[str] = ("drax",)) -> Cluster:
    """Start the whole control plane in `directory`; return once everything is ready.
    `profiles`: the drax kube-scheduler's profile names (`Cluster.profiles`)."""
    if replicas < 1:
        raise ValueError(f"replicas: expected at least 1, got {replicas}")
    bins = control_plane_bins()
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    pki = directory / "pki"
    make_pki(pki)
    if drax_tls:
        make_drax_pki(pki)
    names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "default-scheduler",
             *(f"{n(i)}{suffix}" for i in range(replicas)
               for n, suffix in ((scheduler_name, ""), (drax_name, ""), (drax_name, "-metrics"))))
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    scheme = "https" if drax_tls else "http"
    cluster = Cluster(dir=str(directory), drax_mode=drax_mode,
                      server=f"https://127.0.0.1:{ports['apiserver']}",
                      drax_url=f"{scheme}://127.0.0.1:{ports['drax']}", ports=ports,
                      drax_tls=drax_tls, replicas=replicas, profiles=list(profiles))
    try:
        _start_components(cluster, bins)
    except BaseException:
        stop(cluster)
        raise
    return cluster


def _start_components(cluster: Cluster, bins: dict[str, Path]) -> None:
    d, ports, pki = cluster.path, cluster.ports, cluster.path / "pki"
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
    cluster.spawn("etcd", [
        str(bins["etcd"]), "--name=e2e", f"--data-dir={d / 'etcd'}",
        f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=e2e={peer_url}", "--unsafe-no-fsync", "--log-level=warn"])
    wait_for("etcd /health", lambda: _get_ok(f"{etcd_url}/health"))
    cluster.spawn("kube-apiserver", [
        str(bins["kube-apiserver"]), f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={ports['apiserver']}", f"--cert-dir={d / 'apiserver'}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-cluster-ip-range=10.96.0.0/16",
        # The "kubernetes" Service endpoint cannot be a loopback address, and nothing here needs it.
        "--endpoint-reconciler-type=none",
        "--authorization-mode=Node,RBAC"])
    wait_apiserver_ready(cluster)
    admin_kc = d / "kubeconfig"
    write_kubeconfig(admin_kc, server=cluster.server, ca=pki / "ca.crt",
                     user={"client-certificate": str(pki / "admin.crt"),
                           "client-key": str(pki / "admin.key")})
    cluster.spawn("kube-controller-manager", [
        str(bins["kube-controller-manager"]), f"--kubeconfig={admin_kc}",
        f"--authentication-kubeconfig={admin_kc}", f"--authorization-kubeconfig={admin_kc}",
        "--bind-address=127.0.0.1", f"--secure-port={ports['controller-manager']}",
        "--leader-elect=false",
        # No kubelet heartbeats: the node lifecycle controller would taint every Node.
        "--controllers=*,-node-lifecycle-controller",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        f"--root-ca-file={pki / 'ca.crt'}"])
    kube = cluster.kube()
    try:
        drax_kc = _drax_identity(cluster, kube)
        path = d / "default-scheduler.yaml"
        path.write_text(yaml.safe_dump(default_scheduler_config(admin_kc)))
        cluster.spawn("default-scheduler", kube_scheduler_argv(
            cluster, bins, "default-scheduler", config=path, kubeconfig=admin_kc,
            flags=["--v=2"]))
        for replica in range(cluster.replicas):
            _start_replica(cluster, bins, replica, kubeconfig=drax_kc)
        for replica in range(cluster.replicas):
            wait_drax_ready(cluster, replica=replica)
        names = ["kube-controller-manager", "default-scheduler",
                 *(scheduler_name(i) for i in range(cluster.replicas))]
        for name in names:
            port = ports["controller-manager" if name == "kube-controller-manager" else name]
            wait_for(f"{name} /healthz", lambda p=port, n=name: _up(cluster, n, lambda: _get_ok(
                f"https://127.0.0.1:{p}/healthz", verify=False)))
        namespace, lease = LEASE
        wait_for("drax-scheduler leader lease", lambda: kube.get(
            "Lease", lease, namespace)["spec"].get("holderIdentity"))
        cluster.note_leader(kube)
        wait_for("ServiceAccount default/default",
                 lambda: kube.get("ServiceAccount", "default", "default"))
    finally:
        kube.close()


def kube_scheduler_argv(cluster: Cluster, bins: dict[str, Path], name: str, *, config: Path,
                        kubeconfig: Path, flags: list[str]) -> list[str]:
    return [str(bins["kube-scheduler"]), f"--config={config}", "--bind-address=127.0.0.1",
            f"--secure-port={cluster.ports[name]}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}", *flags]


def _start_replica(cluster: Cluster, bins: dict[str, Path], replica: int, *,
                   kubeconfig: Path) -> None:
    """One drax pod: its UTS namespace (with several replicas), drax, kube-scheduler."""
    enter: list[str] = []
    if cluster.replicas > 1:
        pod = f"pod-{replica}"
        host = cluster.hostname(replica)
        if not _can_unshare_uts():
            raise RuntimeError("--replicas > 1 gives each replica its own hostname with "
                               "`unshare --uts`, which needs root (CAP_SYS_ADMIN)")
        cluster.spawn(pod, ["unshare", "--uts", "sh", "-c",
                            f"hostname {host} && exec sleep infinity"])
        uts = f"/proc/{cluster.pids[pod]}/ns/uts"
        enter = ["nsenter", f"--uts={uts}", "--"]
        wait_for(f"{pod} hostname {host}", lambda: _up(cluster, pod, lambda: subprocess.run(
            [*enter, "hostname"], capture_output=True, text=True).stdout.strip() == host))
    cluster.spawn(drax_name(replica), [*enter, *drax_argv(cluster, replica)])
    name = scheduler_name(replica)
    path = cluster.path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(drax_scheduler_config(cluster, kubeconfig, replica)))
    cluster.spawn(name, [*enter, *kube_scheduler_argv(
        cluster, bins, name, config=path, kubeconfig=kubeconfig,
        flags=drax_scheduler_flags())])


def _can_unshare_uts() -> bool:
    try:
        return subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def _drax_identity(cluster: Cluster, kube: Kube) -> Path:
    """Apply rbac.yaml and the ServiceAccount; write a kubeconfig with its TokenRequest token."""
    namespace, name = DRAX_SA
    for doc in yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text()):
        if doc and doc["kind"] == "ServiceAccount":
            kube.create(doc)
    kube.apply_file(MANIFESTS / "rbac.yaml")
    token = kube.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                               "spec": {"expirationSeconds": TOKEN_SECONDS}})["status"]["token"]
    path = cluster.path / "drax.kubeconfig"
    write_kubeconfig(path, server=cluster.server, ca=cluster.path / "pki" / "ca.crt",
                     user={"token": token})
    return path


def stop(cluster: Cluster) -> None:
    """Stop every component, the API's clients first and etcd last."""
    for name in reversed(list(cluster.pids)):
        cluster.kill(name)


def make_node_ready(kube: Kube, name: str, *, labels: dict[str, str] | None = None,
                    capacity: dict[str, str] | None = None, drax_pool: bool = True) -> None:
    """Create Node `name` (no kubelet) and patch its status to Ready.

    With `drax_pool` the node carries DRAX_POOL_LABEL, the label the drax profile's
    NodeAffinity addedAffinity requires (manifests/kube-scheduler/scheduler-config.yaml)."""
    pool = dict([DRAX_POOL_LABEL]) if drax_pool else {}
    kube.create({"apiVersion": "v1", "kind": "Node",
                 "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                       **pool, **(labels or {})}}})
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **(capacity or {})}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.patch("Node", name, {"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "e2e harness", "lastHeartbeatTime": now,
                        "lastTransitionTime": now}]}}, subresource="status")
    # Admission (TaintNodesByCondition) taints a new Node not-ready; the node lifecycle
    # controller that would lift it is off (no kubelet heartbeats), so lift it here.
    kube.patch("Node", name, {"spec": {"taints": None}})


def profile_names(text: str) -> list[str]:
    """`--profiles`: kube-scheduler profile names, read as drax reads its
    `scheduler_name` setting, so both sides get the same list."""
    try:
        return list(FIELDS["scheduler_name"](text, "--profiles"))
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--profiles: ")) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane and drax")
    up.add_argument("--dir", required=True, type=Path,
                    help="where the cluster's files, logs and cluster.json go")
    up.add_argument("--drax-mode", choices=("allocator", "advisor"), default="allocator",
                    help="drax serve --mode; advisor also leaves allocation and bind to "
                         "kube-scheduler's own plugin (default: allocator)")
    up.add_argument("--replicas", type=int, default=1,
                    help="drax pods (kube-scheduler + drax each) sharing the leader Lease")
    up.add_argument("--profiles", type=profile_names, default=["drax"], metavar="NAME[,NAME]",
                    help="the drax kube-scheduler's profiles, each calling drax, which "
                         "serves (and preempts for) them all (default: drax)")
    down = sub.add_parser("down", help="stop what `up` started")
    down.add_argument("--dir", required=True, type=Path, help="the directory `up` was given")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "up":
        try:
            cluster = start(args.dir, drax_mode=args.drax_mode, replicas=args.replicas,
                            profiles=args.profiles)
        except (TimeoutError, RuntimeError, ValueError, subprocess.CalledProcessError) as exc:
            print(f"cluster up: {exc}\nlogs: {args.dir / 'logs'}", file=sys.stderr)
            return 1
        print(up_summary(cluster))
        return 0
    try:
        cluster = Cluster.load(args.dir)
    except (OSError, ValueError, TypeError) as exc:
        print(f"cluster down: no cluster.json in {args.dir}: {exc}", file=sys.stderr)
        return 1
    stop(cluster)
    return 0


def up_summary(cluster: Cluster) -> str:
    """The line `up` prints: where to reach the cluster and drax, and what runs."""
    leader = next((e for e in cluster.schedulers if "_" in e["identity"]), None)
    return (f"cluster up: kubeconfig {cluster.path / 'kubeconfig'}, drax {cluster.drax_url}"
            + (f", profiles {','.join(cluster.profiles)}" if cluster.profiles != ["drax"]
               else "")
            + (f", {cluster.replicas} replicas, leader: replica {leader['replica']}"
               if cluster.replicas > 1 and leader else ""))


if __name__ == "__main__":
    sys.exit(main())
