"""TLS credentials for servers and clients, from PEM files (only grpc: the SDK uses it too).

Servers re-read their certificate and key when the files change (a rotated certificate —
cert-manager, a renewed Secret — is used from the next handshake on, without a restart);
with a client CA they require client certificates (mutual TLS).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import grpc

__all__ = ["channel_credentials", "server_credentials"]

log = logging.getLogger(__name__)


def _read(path: str | os.PathLike[str]) -> bytes:
    return Path(path).read_bytes()


class _Reloader:
    """Hands gRPC a new certificate configuration whenever the files' mtimes change."""

    def __init__(self, cert: Path, key: Path, client_ca: Path | None) -> None:
        self.paths = [p for p in (cert, key, client_ca) if p is not None]
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self._lock = threading.Lock()
        self._stamp = self._mtimes()

    def _mtimes(self) -> tuple[float, ...]:
        return tuple(p.stat().st_mtime_ns for p in self.paths)

    def configuration(self) -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(_read(self.key), _read(self.cert))],
            root_certificates=_read(self.client_ca) if self.client_ca else None,
        )

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each handshake: None keeps the current configuration."""
        with self._lock:
            try:
                stamp = self._mtimes()
                if stamp == self._stamp:
                    return None
                config = self.configuration()
            except (OSError, ValueError) as err:  # half-written files: keep the old ones
                log.warning("TLS files changed but cannot be read yet: %s", err)
                return None
            self._stamp = stamp
            log.info("TLS certificate reloaded from %s", self.cert)
            return config


def server_credentials(
    cert_file: str | os.PathLike[str],
    key_file: str | os.PathLike[str],
    client_ca_file: str | os.PathLike[str] | None = None,
) -> grpc.ServerCredentials:
    """Server TLS from PEM files, reloaded when they change; mutual TLS with a client CA."""
    reloader = _Reloader(
        Path(cert_file), Path(key_file), Path(client_ca_file) if client_ca_file else None
    )
    return grpc.dynamic_ssl_server_credentials(
        reloader.configuration(),
        cast(Callable[[], grpc.ServerCertificateConfiguration], reloader.fetch),  # None: keep
        require_client_authentication=client_ca_file is not None,
    )


def channel_credentials(
    ca_file: str | os.PathLike[str] | None = None,
    client_cert_file: str | os.PathLike[str] | None = None,
    client_key_file: str | os.PathLike[str] | None = None,
) -> grpc.ChannelCredentials:
    """Client TLS: servers verified with ``ca_file`` (the system's roots when None), and a
    client certificate for mutual TLS when given."""
    if (client_cert_file is None) != (client_key_file is None):
        raise ValueError("a client certificate needs both its certificate and its key file")
    return grpc.ssl_channel_credentials(
        root_certificates=_read(ca_file) if ca_file else None,
        private_key=_read(client_key_file) if client_key_file else None,
        certificate_chain=_read(client_cert_file) if client_cert_file else None,
    )
