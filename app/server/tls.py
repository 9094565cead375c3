"""TLS for the verbs: server certificate, client-certificate auth, rotation.

kube-scheduler's extender `tlsConfig` presents a client certificate and
checks drax's; with a client CA configured, a handshake without a
certificate signed by that CA fails before any HTTP is read, so nothing but
the scheduler can bind pods. Only TLS 1.2 and newer are offered.

cert-manager rotates the mounted files in place (an atomic symlink swap of the
secret volume), so the files are re-read without a restart: the context the
listener holds has a ClientHello callback (`sni_callback`, which OpenSSL calls
with or without SNI) that checks the files' stamps at most once per
`check_interval` and, when they changed, moves the handshake onto a freshly
built context. Connections already open keep the context they started with;
a half-rotated set (a new certificate with the old key) fails to load, is
logged, and the previous context keeps serving until the set is whole.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

CHECK_INTERVAL_SECONDS: Final = 1.0


class TLSError(ValueError):
    """Certificate, key or CA files that cannot make a TLS context."""


@dataclass(slots=True, frozen=True)
class TLSFiles:
    cert_file: str
    key_file: str
    client_ca_file: str = ""

    def paths(self) -> tuple[str, ...]:
        return tuple(p for p in (self.cert_file, self.key_file, self.client_ca_file) if p)


def build_context(files: TLSFiles) -> ssl.SSLContext:
    """A server context for `files`; raises TLSError naming the file at fault."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=files.cert_file, keyfile=files.key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TLSError(f"tls_cert_file {files.cert_file} / tls_private_key_file "
                       f"{files.key_file}: {exc}") from None
    if files.client_ca_file:
        try:
            context.load_verify_locations(cafile=files.client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TLSError(f"client_ca_file {files.client_ca_file}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _stamp(paths: tuple[str, ...]) -> tuple[tuple[int, int, int], ...]:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((-1, -1, -1))
            continue
        out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


class ReloadingContext:
    """The listener's SSLContext, which hands each handshake the newest files' context."""

    def __init__(self, files: TLSFiles, *,
                 check_interval: float = CHECK_INTERVAL_SECONDS) -> None:
        self.files = files
        self._paths = files.paths()
        self._check_interval = check_interval
        self._stamp = _stamp(self._paths)
        self._current = build_context(files)
        self._checked = time.monotonic()
        self.reloads = 0
        # The listener's own context only routes handshakes: same settings, and
        # the callback that moves each one onto `_current`.
        self.context = build_context(files)
        self.context.sni_callback = self._on_client_hello

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._checked >= self._check_interval:
            self._checked = now
            self._maybe_reload()
        return self._current

    def _maybe_reload(self) -> None:
        stamp = _stamp(self._paths)
        if stamp == self._stamp:
            return
        try:
            fresh = build_context(self.files)
        except TLSError as exc:
            # Mid-rotation, or a broken secret: keep serving with what works and
            # try again on a later handshake.
            log.warning("TLS files changed but cannot be loaded yet (%s); keeping the "
                        "previous certificate", exc)
            return
        self._stamp = stamp
        self._current = fresh
        self.reloads += 1
        log.info("TLS certificate files changed; reloaded (%s)", ", ".join(self._paths))

    def _on_client_hello(self, conn: ssl.SSLObject | ssl.SSLSocket, server_name: str | None,
                         context: ssl.SSLContext) -> None:
        conn.context = self.current()
