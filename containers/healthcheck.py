"""The image's HEALTHCHECK: asks the gRPC health service of whatever PID 1 serves.

One image runs every process, so the check reads PID 1's command line: a service
(`python -m episodic.services.<name>`) is checked on its port, `episodic up` on all four,
anything else (`episodic migrate`, a shell) is healthy while it runs. The overall health
name "" is asked, as the Kubernetes liveness probes do (a database outage takes a service
out of rotation, it does not make the container unhealthy). With TLS on, the services answer
health on the plaintext EPISODIC_HEALTH_PORT, as the probes of k8s/overlays/prod use.
Exit 0: healthy; 1: not.
"""

from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from episodic.endpoints import DEFAULT_PORTS


def targets(cmdline: list[str]) -> list[str]:
    """The services PID 1 serves."""
    for arg in cmdline:
        if arg.startswith("episodic.services."):
            return [arg.rsplit(".", 1)[1]]
    if "up" in cmdline[1:3] and any(a.endswith("episodic") for a in cmdline[:2]):
        return list(DEFAULT_PORTS)
    return []


def port(service: str) -> int:
    health = os.environ.get("EPISODIC_HEALTH_PORT", "").strip()
    if health:
        return int(health)
    own = os.environ.get(f"EPISODIC_{service.upper()}_PORT", "").strip()
    return int(own) if own else DEFAULT_PORTS[service]


def main() -> int:
    with open("/proc/1/cmdline", "rb") as f:
        cmdline = [a.decode() for a in f.read().split(b"\0") if a]
    for service in targets(cmdline):
        with grpc.insecure_channel(f"127.0.0.1:{port(service)}") as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=3
                )
            except grpc.RpcError as err:
                print(f"{service}: {err.code().name}", file=sys.stderr)
                return 1
            if reply.status != health_pb2.HealthCheckResponse.SERVING:
                print(
                    f"{service}: {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}"
                )
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
