"""Settings for `drax serve`, merged from four layers.

Precedence, lowest first: built-in defaults < a YAML file (`--config`, shaped
like `config/drax.yaml`) < environment variables `DRAX_<KEY>` < command-line
flags. One flat table of keys (`FIELDS`) drives the file, the environment and
the validation, so a key added here is settable everywhere with one edit and
`config/drax.yaml` documents the same names. Nested sections (`topology`, `capacity`)
are handed to their owner's parser untouched.

Bad settings raise `ConfigError` naming the layer and the key: a typo in a
config file must stop the process at start, not silently fall back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import yaml

from app.features import GATE_NAMES, FeatureGates, parse_feature_gates

MODES: Final = ("allocator", "advisor")
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
ENV_PREFIX: Final = "DRAX_"
# The kube-scheduler profile that calls drax when no setting names one.
DEFAULT_SCHEDULER_NAMES: Final = ("drax",)


class ConfigError(ValueError):
    """A setting that cannot be used; the message names where it came from."""


@dataclass(slots=True, frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8888
    # Files or folders of Kubernetes objects; empty (and no kubeconfig) = bundled sample.
    inventory: tuple[str, ...] = ()
    kubeconfig: str = ""
    log_level: str = "info"
    access_log: bool = False
    max_body_bytes: int = 16 * 1024 * 1024
    body_read_timeout: float = 10.0  # seconds from a verb's headers to the end of its body
    # Seconds a filter or prioritize may compute; below kube-scheduler's httpTimeout (5 s).
    verb_deadline: float = 4.0
    url_prefix: str = "/scheduler"
    mode: str = "allocator"
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    topology: Mapping[str, Any] = field(default_factory=dict)
    # Claim shapes whose remaining capacity /metrics reports (app.observability).
    capacity: Mapping[str, Any] = field(default_factory=dict)
    # TLS for the verbs; with a client CA every connection must present a
    # certificate it signed (kube-scheduler's extender tlsConfig).
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    client_ca_file: str = ""
    # Health, readiness and metrics also on this plain-HTTP port (0: only on `port`),
    # so probes and Prometheus need no client certificate.
    metrics_port: int = 0
    metrics_host: str = ""  # empty: the same address as `host`
    # `namespace/name` of the Lease this replica's kube-scheduler elects its leader
    # with; what drax writes on its own runs only while that kube-scheduler holds
    # it. Empty: this replica always leads (one replica).
    leader_election_lease: str = ""
    # The Lease holder is this replica's kube-scheduler when its identity is
    # `<this>_<uuid>`; empty: the host name, which a sidecar shares with it.
    leader_election_identity: str = ""
    # Kube mode: preempt lower-priority pods for the devices of pending pods of
    # `scheduler_name` (the profiles of the kube-scheduler that calls drax: one
    # name or several), holding the devices chosen for a preemptor
    # `preemption_hold_seconds` once its victims are gone (app.preemption).
    preemption: bool = True
    scheduler_name: tuple[str, ...] = DEFAULT_SCHEDULER_NAMES
    preemption_hold_seconds: float = 300.0
    # Serve only the Nodes with all these labels (a node pool of one scheduler
    # among several); empty: every node.
    node_selector: Mapping[str, str] = field(default_factory=dict)

    @property
    def features(self) -> FeatureGates:
        return FeatureGates().with_overrides(self.feature_gates)

    @property
    def lease(self) -> tuple[str, str] | None:
        """`leader_election_lease` as (namespace, name), None if unset."""
        if not self.leader_election_lease:
            return None
        return parse_lease_name(self.leader_election_lease)


def parse_lease_name(text: str) -> tuple[str, str]:
    """`namespace/name` -> (namespace, name); ConfigError naming the problem."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ConfigError(f"leader_election_lease: expected namespace/name, got {text!r}")
    return namespace, name


def _as_str(value: Any, key: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return str(value)


def _as_int(value: Any, key: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None


def _as_float(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected a number, got {value!r}") from None


def _as_bool(value: Any, key: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.strip().lower() in ("true", "1", "yes")
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _as_paths(value: Any, key: str) -> tuple[str, ...]:
    # The environment carries one string; several paths are separated like $PATH.
    if isinstance(value, str):
        return tuple(p for p in value.split(os.pathsep) if p)
    if isinstance(value, list | tuple) and all(isinstance(p, str) for p in value):
        return tuple(value)
    raise ConfigError(f"{key}: expected a list of paths, got {value!r}")


def _as_names(value: Any, key: str) -> tuple[str, ...]:
    # One name, several separated by commas (the environment's form), or a list.
    if isinstance(value, str):
        names = [n.strip() for n in value.split(",")]
    elif isinstance(value, list | tuple) and all(isinstance(n, str) for n in value):
        names = [n.strip() for n in value]
    else:
        raise ConfigError(f"{key}: expected a name or a list of names, got {value!r}")
    if not names or not all(names):
        raise ConfigError(f"{key}: expected non-empty names, got {value!r}")
    return tuple(dict.fromkeys(names))


def _as_gates(value: Any, key: str) -> dict[str, bool]:
    if isinstance(value, str):
        try:
            gates = parse_feature_gates(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    elif isinstance(value, Mapping):
        gates = {str(k): _as_bool(v, f"{key}.{k}") for k, v in value.items()}
    else:
        raise ConfigError(f"{key}: expected Name=true,... or a mapping, got {value!r}")
    unknown = sorted(set(gates) - set(GATE_NAMES))
    if unknown:
        raise ConfigError(f"{key}: unknown feature gate(s) {', '.join(unknown)}; "
                          f"known: {', '.join(GATE_NAMES)}")
    return gates


def parse_node_selector(text: str) -> dict[str, str]:
    """`LABEL=VALUE[,LABEL=VALUE...]` -> labels; ValueError naming the bad term."""
    labels: dict[str, str] = {}
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        label, sep, value = term.partition("=")
        label, value = label.strip(), value.strip()
        if not sep or not label or "=" in value or "!" in label:
            raise ValueError(f"expected LABEL=VALUE, got {term!r}")
        if labels.get(label, value) != value:
            raise ValueError(f"label {label!r} given twice with different values")
        labels[label] = value
    return labels


def _as_labels(value: Any, key: str) -> dict[str, str]:
    if isinstance(value, str):
        try:
            return parse_node_selector(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    if isinstance(value, Mapping):
        return {str(k): _as_str(v, f"{key}.{k}") for k, v in value.items()}
    raise ConfigError(f"{key}: expected LABEL=VALUE,... or a mapping, got {value!r}")


def _as_section(value: Any, key: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected a mapping, got {value!r}")
    return dict(value)


def reject_unknown_keys(where: str, raw: Mapping[Any, Any], known: Sequence[str]) -> None:
    """ValueError naming the keys of section `where` that are not `known`, and the
    known ones: the nested sections' parsers (`topology`, `capacity`) check alike."""
    unknown = sorted(map(str, set(raw) - set(known)))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                         f"known: {', '.join(known)}")


# Setting name -> converter. The file uses these names; the environment uses
# DRAX_<NAME upper-cased>; `topology` and `capacity` only exist in files (nested).
FIELDS: Final[dict[str, Callable[[Any, str], Any]]] = {
    "host": _as_str,
    "port": _as_int,
    "inventory": _as_paths,
    "kubeconfig": _as_str,
    "log_level": _as_str,
    "access_log": _as_bool,
    "max_body_bytes": _as_int,
    "body_read_timeout": _as_float,
    "verb_deadline": _as_float,
    "url_prefix": _as_str,
    "mode": _as_str,
    "feature_gates": _as_gates,
    "topology": _as_section,
    "capacity": _as_section,
    "tls_cert_file": _as_str,
    "tls_private_key_file": _as_str,
    "client_ca_file": _as_str,
    "metrics_port": _as_int,
    "metrics_host": _as_str,
    "leader_election_lease": _as_str,
    "leader_election_identity": _as_str,
    "preemption": _as_bool,
    "scheduler_name": _as_names,
    "preemption_hold_seconds": _as_float,
    "node_selector": _as_labels,
}
ENV_FIELDS: Final = tuple(k for k in FIELDS if k not in ("topology", "capacity"))


def _convert(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_")
        converter = FIELDS.get(name)
        if converter is None:
            raise ConfigError(f"{where}: unknown setting {key!r}; known: {', '.join(FIELDS)}")
        out[name] = converter(value, f"{where}: {key}")
    return out


def yaml_problem(exc: Exception) -> str:
    """A parser's error on one line: for PyYAML's, line and column, then what
    is wrong (its own text spans several lines, pointing at the spot)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return " ".join(str(exc).split())
    return f"line {mark.line + 1} column {mark.column + 1}: {problem}"


def read_config_file(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: cannot parse: {yaml_problem(exc)}") from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(doc).__name__}")
    return _convert({k: v for k, v in doc.items() if v is not None}, str(path))


def read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    raw = {name: environ[ENV_PREFIX + name.upper()] for name in ENV_FIELDS
           if ENV_PREFIX + name.upper() in environ}
    return _convert(raw, "environment")


def _validate(settings: Settings, *, check_files: bool) -> Settings:
    if not 0 <= settings.port <= 65535:
        raise ConfigError(f"port: {settings.port} is not a TCP port")
    if not 0 <= settings.metrics_port <= 65535:
        raise ConfigError(f"metrics_port: {settings.metrics_port} is not a TCP port")
    if settings.metrics_port and settings.metrics_port == settings.port:
        raise ConfigError(f"metrics_port: {settings.metrics_port} is also the verbs' port")
    if bool(settings.tls_cert_file) != bool(settings.tls_private_key_file):
        raise ConfigError("tls_cert_file and tls_private_key_file: set both or neither")
    if settings.client_ca_file and not settings.tls_cert_file:
        raise ConfigError("client_ca_file: client certificates need TLS; "
                          "set tls_cert_file and tls_private_key_file too")
    for key in ("tls_cert_file", "tls_private_key_file", "client_ca_file"):
        path = getattr(settings, key)
        if check_files and path and not Path(path).is_file():
            raise ConfigError(f"{key}: {path}: no such file")
    if not 0 < settings.body_read_timeout < float("inf"):
        raise ConfigError(f"body_read_timeout: must be a positive number of seconds, "
                          f"got {settings.body_read_timeout}")
    if not 0 < settings.verb_deadline < float("inf"):
        raise ConfigError(f"verb_deadline: must be a positive number of seconds, "
                          f"got {settings.verb_deadline}")
    if settings.max_body_bytes < 1:
        raise ConfigError(f"max_body_bytes: must be positive, got {settings.max_body_bytes}")
    if settings.mode not in MODES:
        raise ConfigError(f"mode: expected one of {', '.join(MODES)}, got {settings.mode!r}")
    level = settings.log_level.lower()
    if level not in LOG_LEVELS:
        raise ConfigError(f"log_level: expected one of {', '.join(LOG_LEVELS)}, "
                          f"got {settings.log_level!r}")
    prefix = settings.url_prefix.strip()
    if prefix and not prefix.startswith("/"):
        raise ConfigError(f"url_prefix: must start with '/', got {prefix!r}")
    if settings.leader_election_lease:
        parse_lease_name(settings.leader_election_lease)
    return replace(settings, log_level=level, url_prefix=prefix.rstrip("/"))


def load_settings(*, config_path: str | Path | None = None,
                  environ: Mapping[str, str] | None = None,
                  overrides: Mapping[str, Any] | None = None,
                  check_files: bool = True) -> Settings:
    """Merge defaults < config file < environment < `overrides` (CLI flags; None = unset).

    A bad override is named by its flag (`--scheduler-name`). `check_files`
    False leaves the TLS files unchecked: only the server opens them, and a
    what-if command reading a deployment's settings runs where they may not be.
    """
    merged: dict[str, Any] = {}
    env = os.environ if environ is None else environ
    path = config_path or env.get(ENV_PREFIX + "CONFIG")
    if path:
        merged.update(read_config_file(path))
    merged.update(read_environment(env))
    for key, value in (overrides or {}).items():
        if value is not None:
            merged[key] = FIELDS[key](value, "--" + key.replace("_", "-"))
    return _validate(Settings(**merged), check_files=check_files)
