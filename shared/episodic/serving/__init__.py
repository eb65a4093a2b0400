"""The server runtime the four services share (installed with the ``server`` extra): one
process's bootstrap and what stands between a caller and a servicer.

- :mod:`~episodic.serving.server`: :func:`~episodic.serving.server.serve`, the one
  bootstrap of every service (gRPC server, error mapping, health and reflection, metrics,
  graceful shutdown);
- :mod:`~episodic.serving.transport`: the door, the asyncio transport that admits a call
  before a handler thread is spent on it;
- :mod:`~episodic.serving.guard`: API keys, roles and scopes enforced per call, per-key and
  per-peer limits;
- :mod:`~episodic.serving.stop_signals`: SIGTERM/SIGINT handling that takes no lock (shared
  with ``episodic up``).

Nothing below the runtime (the core modules, ``episodic.store``, ``episodic.providers``)
and nothing of the SDK imports this package (tests/test_layers.py). This module imports
nothing, so importing one of its modules loads only that module.
"""
