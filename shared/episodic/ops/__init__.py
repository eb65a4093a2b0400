"""The operator's tools behind the ``episodic`` commands: what they do, apart from the
argument parsing of :mod:`episodic.cli` (and the pages of :mod:`episodic.console`).

- :mod:`~episodic.ops.export`: ``episodic export``, a dataset as JSON lines through the
  SDK, optionally pseudonymised (core install).
- :mod:`~episodic.ops.backfill`: ``episodic import``, existing conversations written
  through the SDK's normal write path, resumable (core install).
- :mod:`~episodic.ops.replay`: ``episodic replay``, an export replayed through the current
  pipeline on a scratch database, in process (server extra; it runs the services' domain
  code by design, so it lives above them, in the repository's tools/replay/, installed
  here by pyproject.toml's package-dir).
- :mod:`~episodic.ops.journey`: ``episodic trace`` and the console's episode page, an
  episode's journey read back from the services' spans (core install).
- :mod:`~episodic.ops.supervisor`: ``episodic up``, the database and the four services on
  one machine; :mod:`~episodic.ops.runtime`, the embedded PostgreSQL it starts (also
  started by ``episodic replay`` and the test harness, :mod:`episodic.testing`).

This package imports nothing itself, so the core install can load the export, the import
and the journey without the server extra's dependencies.
"""
