"""Settings: defaults < config file < DRAX_* environment < command-line flags."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.cli import build_parser
from app.cli.serve import settings_from
from app.config import FIELDS, ConfigError, Settings, load_settings

REPO = Path(__file__).resolve().parents[2]


def test_defaults() -> None:
    s = load_settings(environ={})
    assert (s.host, s.port, s.inventory, s.mode, s.url_prefix) == (
        "127.0.0.1", 8888, (), "allocator", "/scheduler")
    assert s.max_body_bytes == 16 * 1024 * 1024
    assert s.features.list_type_attributes is False


def test_documented_config_file_lists_every_key_with_its_default() -> None:
    doc = yaml.safe_load((REPO / "config" / "drax.yaml").read_text())
    assert set(doc) == set(FIELDS)
    from_file = load_settings(config_path=REPO / "config" / "drax.yaml", environ={})
    assert from_file.features == Settings().features
    assert from_file == Settings(feature_gates=from_file.feature_gates)


def test_scheduler_name_is_one_profile_or_several(tmp_path: Path) -> None:
    assert load_settings(environ={}).scheduler_name == ("drax",)
    env = {"DRAX_SCHEDULER_NAME": "drax, drax-gpu"}
    assert load_settings(environ=env).scheduler_name == ("drax", "drax-gpu")
    cfg = tmp_path / "drax.yaml"
    cfg.write_text("scheduler_name: [drax, drax-gpu, drax]\n")
    assert load_settings(config_path=cfg, environ={}).scheduler_name == ("drax", "drax-gpu")
    cfg.write_text("scheduler_name: drax-b\n")
    assert load_settings(config_path=cfg, environ={}).scheduler_name == ("drax-b",)
    for bad in ("scheduler_name: []\n", "scheduler_name: [drax, '']\n",
                "scheduler_name: {a: b}\n"):
        cfg.write_text(bad)
        with pytest.raises(ConfigError, match="scheduler_name"):
            load_settings(config_path=cfg, environ={})
    args = build_parser().parse_args(["serve", "--scheduler-name", "drax-a,drax-b"])
    assert settings_from(args).scheduler_name == ("drax-a", "drax-b")


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    cfg = tmp_path / "drax.yaml"
    cfg.write_text("port: 1000\nhost: 0.0.0.0\nmode: advisor\nlog_level: debug\n")
    env = {"DRAX_PORT": "2000", "DRAX_INVENTORY": "a.yaml:b",
           "DRAX_FEATURE_GATES": "DRADeviceTaints=false"}
    s = load_settings(config_path=cfg, environ=env, overrides={"port": 3000, "host": None})
    assert s.port == 3000  # flag beats env beats file
    assert s.host == "0.0.0.0"  # unset flag keeps the file's value
    assert s.mode == "advisor" and s.log_level == "debug"
    assert s.inventory == ("a.yaml", "b")
    assert s.features.device_taints is False


def test_config_path_from_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "drax.yaml"
    cfg.write_text("url_prefix: /ext/\n")
    assert load_settings(environ={"DRAX_CONFIG": str(cfg)}).url_prefix == "/ext"


@pytest.mark.parametrize("text, fragment", [
    ("prot: 1\n", "unknown setting 'prot'"),
    ("port: eighty\n", "port: expected an integer"),
    ("port: 70000\n", "not a TCP port"),
    ("mode: greedy\n", "mode: expected one of allocator, advisor"),
    ("feature_gates: {DRANope: true}\n", "unknown feature gate(s) DRANope"),
    ("access_log: maybe\n", "expected true or false"),
    ("- 1\n", "expected a mapping of settings"),
    ("port: [\n", "cannot parse"),
    ("max_body_bytes: 0\n", "must be positive"),
    ("url_prefix: ext\n", "must start with '/'"),
    ("tls_cert_file: a.crt\n", "set both or neither"),
    ("client_ca_file: ca.crt\n", "client certificates need TLS"),
    ("tls_cert_file: no.crt\ntls_private_key_file: no.key\n", "tls_cert_file: no.crt: no such"),
    ("metrics_port: 8888\n", "also the verbs' port"),
    ("metrics_port: -1\n", "metrics_port: -1 is not a TCP port"),
])
def test_bad_config_file_names_the_key(tmp_path: Path, text: str, fragment: str) -> None:
    cfg = tmp_path / "drax.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(config_path=cfg, environ={})
    assert fragment in str(err.value)


def test_bad_environment_and_missing_file() -> None:
    with pytest.raises(ConfigError, match="environment: port: expected an integer"):
        load_settings(environ={"DRAX_PORT": "x"})
    with pytest.raises(ConfigError, match=r"no-such\.yaml"):
        load_settings(config_path="no-such.yaml", environ={})


def test_tls_settings_from_the_environment(tmp_path: Path) -> None:
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (tmp_path / name).write_text("x")
    s = load_settings(environ={"DRAX_TLS_CERT_FILE": str(tmp_path / "tls.crt"),
                               "DRAX_TLS_PRIVATE_KEY_FILE": str(tmp_path / "tls.key"),
                               "DRAX_CLIENT_CA_FILE": str(tmp_path / "ca.crt"),
                               "DRAX_METRICS_PORT": "9090"})
    assert s.client_ca_file.endswith("ca.crt") and s.metrics_port == 9090
