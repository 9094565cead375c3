"""Throw-away certificate authorities and certificates for the TLS tests, made
with the `openssl` command line (the `cryptography` package is not a drax
dependency). EC P-256 keys: generating them takes milliseconds."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(slots=True, frozen=True)
class Pair:
    cert: Path
    key: Path


def _run(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def make_ca(folder: Path, name: str) -> Pair:
    pair = Pair(folder / f"{name}.crt", folder / f"{name}.key")
    _run("req", "-x509", *_EC, "-keyout", pair.key, "-out", pair.cert, "-days", "2",
         "-subj", f"/CN={name}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pair


def issue(folder: Path, ca: Pair, name: str, *, client: bool, days: int = 2) -> Pair:
    """A leaf certificate signed by `ca`; `days=-1` makes one that has expired."""
    pair = Pair(folder / f"{name}.crt", folder / f"{name}.key")
    csr = folder / f"{name}.csr"
    ext = folder / f"{name}.ext"
    usage = "clientAuth" if client else "serverAuth"
    ext.write_text(f"extendedKeyUsage={usage}\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "basicConstraints=CA:FALSE\n")
    _run("req", *_EC, "-keyout", pair.key, "-out", csr, "-subj", f"/CN={name}")
    _run("x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial",
         "-out", pair.cert, "-days", str(days), "-extfile", ext)
    return pair
