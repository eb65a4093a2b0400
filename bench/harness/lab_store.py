"""The recall lab's kept LoCoMo store (``--data-dir``): its keyring, its embedded server and
database, and LoCoMo asked through a Recall service on it (the lab's ``--confirm``, which
``reembed_bench`` also runs).
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import locomo

DATABASE = "locomo_lab"


def _keep_keyring(data_dir: Path) -> None:
    """The test keyring is made per process; the kept database needs the same one in every
    run (its datasets are encrypted at rest, as ``episodic up`` runs them)."""
    from episodic.crypto import LocalKeyring
    from episodic.testing import keys

    path = data_dir / "master-keys.json"
    if not path.exists():
        LocalKeyring.create(path)
    keys._keyring = path


_STARTED: dict[Path, str] = {}


def _database(data_dir: Path, stack: ExitStack) -> str:
    """The kept database's URL. Its server is started once per process (an embedded server
    stopped in a process does not start again in it) and stopped when the process exits;
    ``stack`` is kept for the callers' shape."""
    import atexit

    import psycopg

    from episodic.ops.runtime import EmbeddedPostgres
    from episodic.store import migrate
    from episodic.testing.database import with_database

    if data_dir in _STARTED:
        return _STARTED[data_dir]
    pg = EmbeddedPostgres(data_dir / "pgdata")
    admin = pg.start()
    atexit.register(pg.stop)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)
        ).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
    url = with_database(admin, DATABASE)
    migrate.upgrade(url, 384)
    _STARTED[data_dir] = url
    return url


def confirm(
    url: str,
    conversations: list[locomo.Conversation],
    split: dict[str, set[str]],
    env: dict[str, str] | None = None,
    threshold: float | None = None,
    abstain: bool = False,
) -> None:
    """The recommended threshold (or ``threshold``) through a running Recall service (gRPC) on the kept
    database: R@1/R@5/MRR per half without and with it, the share of foreign and
    adversarial questions answered with nothing, and the latency of both, interleaved.
    ``env``: the Recall's embedding settings (default MiniLM, the kept database's); the
    threshold is the one recommended with that embedder's relevance curve. ``abstain``:
    ask with ``abstain`` instead (the service's own thresholds for its model)."""
    import grpc

    from bench.harness.suite import _recall
    from episodic.store.relevance import curve_for
    from episodic.testing.processes import start_service
    from episodic.v1.recall_service_pb2_grpc import RecallServiceStub

    provider = (env or {}).get("EPISODIC_EMBEDDING_PROVIDER", "minilm")
    if threshold is None:  # the one recommended with its curve
        threshold = curve_for(f"{provider}:").recommended_min_relevance

    def asked(t: float) -> dict[str, Any]:
        """The request's threshold fields: none for 0, else abstain or min_relevance."""
        if not t:
            return {}
        return {"abstain": True} if abstain else {"min_relevance": t}

    service = start_service(
        "recall",
        url,
        {
            "EPISODIC_EMBEDDING_PROVIDER": "minilm",
            "EPISODIC_LOG_LEVEL": "WARNING",
            **(env or {}),
        },
    )
    try:
        channel = grpc.insecure_channel(service.address)
        stub = RecallServiceStub(channel)
        adversarial = locomo.adversarial_questions()
        scores = {(h, t): locomo.Scores() for h in split for t in (0.0, threshold)}
        empty: dict[tuple[str, str], list[bool]] = {}
        latency: dict[float, list[float]] = {0.0: [], threshold: []}
        for i, conv in enumerate(conversations):
            half = next(h for h, ids in split.items() if conv.conversation_id in ids)
            foreign = conversations[(i + 1) % len(conversations)]
            for q in conv.questions:
                for t in (0.0, threshold):
                    got, ms = _recall(stub, conv.dataset, q.question, q.asked_at, False, **asked(t))
                    scores[(half, t)].add(q.category, got, q.evidence_threads)
                    latency[t].append(ms)
                got, _ = _recall(
                    stub, foreign.dataset, q.question, q.asked_at, False, **asked(threshold)
                )
                empty.setdefault((half, "foreign"), []).append(not got)
            for q in adversarial.get(conv.conversation_id, []):
                got, _ = _recall(
                    stub, conv.dataset, q.question, q.asked_at, False, **asked(threshold)
                )
                empty.setdefault((half, "adversarial"), []).append(not got)
        channel.close()
    finally:
        service.terminate()
    label = "abstain" if abstain else f"min_relevance {threshold}"
    print(f"\nThrough the Recall service (gRPC), {label}:\n")
    print(
        "| half | R@1 / R@5 / MRR without | with | foreign with nothing | adversarial with nothing |"
    )
    print("|---|---|---|---|---|")
    for half in split:
        b, t = scores[(half, 0.0)].overall(), scores[(half, threshold)].overall()
        f, a = empty[(half, "foreign")], empty.get((half, "adversarial"), [])
        print(
            f"| {half} | {b['R@1']:.3f} / {b['R@5']:.3f} / {b['MRR']:.3f} "
            f"| {t['R@1']:.3f} / {t['R@5']:.3f} / {t['MRR']:.3f} "
            f"| {sum(f) / len(f):.3f} ({len(f)}) | {sum(a) / max(len(a), 1):.3f} ({len(a)}) |"
        )
    for t, values in latency.items():
        values.sort()
        print(
            f"Recall latency, {label if t else 'no threshold'}: p50 {values[len(values) // 2]:.2f} ms, "
            f"p99 {values[int(len(values) * 0.99)]:.2f} ms ({len(values)} calls, interleaved)"
        )
    print(f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
