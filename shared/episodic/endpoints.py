"""Where each service listens by default and how clients find it — the one rule shared by
the SDK, the CLI and the services (no dependencies: the SDK installs without the server).

A client reaches ``service`` at ``EPISODIC_<SERVICE>_ADDRESS`` when set, else at
``127.0.0.1:<EPISODIC_<SERVICE>_PORT>``, else at ``127.0.0.1:<the default port>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["DEFAULT_PORTS", "SERVICES", "address_from_env", "resolve_address"]

#: The four services, in the order ``episodic up`` starts them.
SERVICES: tuple[str, ...] = ("scheduler", "ingest", "summariser", "recall")
DEFAULT_PORTS: dict[str, int] = {
    "ingest": 50051,
    "scheduler": 50052,
    "summariser": 50053,
    "recall": 50054,
}


def resolve_address(service: str, address: str | None, port: int | None) -> str:
    """``address`` when given, else ``127.0.0.1:<port or the default port>``."""
    if service not in DEFAULT_PORTS:
        raise ValueError(f"unknown service {service!r}; use one of {', '.join(SERVICES)}")
    if address:
        return address
    return f"127.0.0.1:{port if port else DEFAULT_PORTS[service]}"


def address_from_env(service: str, environ: Mapping[str, str] | None = None) -> str:
    """The address of ``service`` from the ``EPISODIC_*`` environment variables."""
    env = os.environ if environ is None else environ
    prefix = f"EPISODIC_{service.upper()}"
    raw_port = env.get(f"{prefix}_PORT", "").strip()
    try:
        port = int(raw_port) if raw_port else None
    except ValueError:
        raise ValueError(f"{prefix}_PORT={raw_port!r} is not a port number") from None
    return resolve_address(service, env.get(f"{prefix}_ADDRESS", "").strip() or None, port)
