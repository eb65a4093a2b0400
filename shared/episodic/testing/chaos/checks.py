"""The checks at the end of a chaos run: every acknowledged message stored as it was
acknowledged and nothing else, the invariants, nothing stuck, every value sealed at rest,
no stale write (from the write audit), only acceptable codes seen by clients, and the
services' logged errors and warnings counted."""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import Any, ClassVar

import psycopg

from episodic.crypto import PLAIN, SEALED
from episodic.testing.chaos.audit import claimant_pid
from episodic.testing.chaos.client_side import sha256
from episodic.testing.chaos.config import EXPECTED_CODES, RETRYABLE
from episodic.testing.chaos.result import fmt_counts
from episodic.testing.chaos.state import RunState
from episodic.testing.invariants import InvariantViolation, check_invariants
from episodic.testing.keys import test_vault

log = logging.getLogger(__name__)


def _scalar(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row is not None else 0


class Checks(RunState):
    """What is verified once the load is done and the services settled."""

    # -- verification

    def verify(self) -> None:
        assert self.engine is not None
        result = self.result
        problems = result.problems
        with self.ledger.lock:
            acked = list(self.ledger.acked.values())
            abandoned = dict(self.ledger.abandoned)
            checkpoints = list(self.ledger.checkpoints)
        result.messages_acked = len(acked)
        with psycopg.connect(self.db_url) as conn:
            conn.execute(
                "CREATE TEMP TABLE acked (thread_id uuid, sequence bigint, key text, "
                "sha256 text, role text)"
            )
            with conn.cursor().copy(
                "COPY acked (thread_id, sequence, key, sha256, role) FROM STDIN"
            ) as copy:
                for a in acked:
                    copy.write_row((a.thread_id, a.sequence, a.key, a.sha256, a.role))
            conn.execute("CREATE INDEX ON acked (thread_id, sequence)")
            conn.execute("ANALYZE acked")
            lost = conn.execute(
                "SELECT a.thread_id, a.sequence, a.key FROM acked a "
                "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.thread_id = a.thread_id "
                "AND m.sequence = a.sequence) ORDER BY 1, 2"
            ).fetchall()
            # Content is sealed at rest: opened here with the suite's keyring, then hashed
            # (with encryption, a value in the clear or a dataset without a data key is a
            # problem of its own: see check_at_rest).
            vault = test_vault()
            keys: dict[str, Any] = {}
            changed = []
            unsealed = []
            with conn.cursor(name="acked_rows") as cursor:
                cursor.execute(
                    "SELECT a.thread_id, a.sequence, a.key, m.idempotency_key, a.role, m.role, "
                    "a.sha256, m.content, t.dataset "
                    "FROM acked a JOIN messages m ON m.thread_id = a.thread_id "
                    "AND m.sequence = a.sequence JOIN threads t ON t.thread_id = m.thread_id "
                    "ORDER BY 1, 2"
                )
                for r in cursor:
                    dataset = r[8]
                    if dataset not in keys:
                        with self.engine.connect() as sa:
                            keys[dataset] = vault.for_read(sa, dataset, fresh=True)
                    stored = bytes(r[7])
                    if self.cfg.encryption and (
                        stored[:1] != SEALED or keys[dataset].key_id is None
                    ):
                        unsealed.append((r[0], r[1], dataset))
                    content = keys[dataset].open(stored, "messages.content")
                    same = sha256(content) == r[6]
                    if r[3] != r[2] or r[5] != r[4] or not same:
                        changed.append((*r[:6], same))
            duplicates = conn.execute(
                "SELECT thread_id, idempotency_key, count(*) FROM messages "
                "WHERE idempotency_key IS NOT NULL GROUP BY 1, 2 HAVING count(*) > 1"
            ).fetchall()
            unacked = conn.execute(
                "SELECT m.thread_id, m.sequence, m.idempotency_key FROM messages m "
                "WHERE NOT EXISTS (SELECT 1 FROM acked a WHERE a.thread_id = m.thread_id "
                "AND a.sequence = m.sequence) ORDER BY 1, 2"
            ).fetchall()
            result.messages_stored = _scalar(conn, "SELECT count(*) FROM messages")
            conn.execute("CREATE TEMP TABLE checkpoints (thread_id uuid, sequence bigint)")
            with conn.cursor().copy("COPY checkpoints (thread_id, sequence) FROM STDIN") as copy:
                for checkpoint in checkpoints:
                    copy.write_row(checkpoint)
            result.checkpoints = len(checkpoints)
            result.checkpoints_kept = _scalar(
                conn,
                "SELECT count(*) FROM checkpoints c WHERE EXISTS (SELECT 1 FROM episodes e "
                "WHERE e.thread_id = c.thread_id AND e.end_sequence = c.sequence)",
            )
            # Where the others went: the window that swallowed the checkpoint.
            result.checkpoints_merged = [
                f"thread {r[0]} EndThread after {r[1]}: window {r[2]}..{r[3]} ({r[4]}, opened "
                f"{r[5]:%H:%M:%S.%f})"
                for r in conn.execute(
                    "SELECT c.thread_id, c.sequence, e.start_sequence, e.end_sequence, "
                    "e.trigger, e.created_at FROM checkpoints c JOIN episodes e "
                    "ON e.thread_id = c.thread_id AND c.sequence BETWEEN e.start_sequence "
                    "AND e.end_sequence - 1 ORDER BY e.created_at LIMIT 10"
                )
            ]
            conn.rollback()
        if lost:
            problems.append(
                f"{len(lost)} acknowledged messages LOST, e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} key {r[2]}" for r in lost[:5])
            )
        if changed:
            problems.append(
                f"{len(changed)} acknowledged messages CHANGED, e.g. "
                + "; ".join(
                    f"thread {r[0]} seq {r[1]}: key {r[2]}→{r[3]} role {r[4]}→{r[5]} "
                    f"same content {r[6]}"
                    for r in changed[:5]
                )
            )
        if unsealed:
            problems.append(
                f"{len(unsealed)} acknowledged messages NOT SEALED at rest (encryption "
                "required), e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} of {r[2]}" for r in unsealed[:5])
            )
        if duplicates:
            problems.append(
                f"{len(duplicates)} idempotency keys stored more than once, e.g. "
                + "; ".join(f"thread {r[0]} key {r[1]} x{r[2]}" for r in duplicates[:5])
            )
        phantom = [r for r in unacked if r[2] not in abandoned]
        if phantom:
            problems.append(
                f"{len(phantom)} stored messages no client was told about and no batch was "
                "given up for, e.g. "
                + "; ".join(f"thread {r[0]} seq {r[1]} key {r[2]}" for r in phantom[:5])
            )
        try:
            check_invariants(self.engine, all_covered=True)
        except InvariantViolation as err:
            problems.append(f"invariants: {err}")

        rows = self.query("SELECT status, count(*) FROM episodes GROUP BY 1 ORDER BY 1")
        result.episodes_by_status = {str(r[0]): int(r[1]) for r in rows}
        result.episodes_total = sum(result.episodes_by_status.values())
        rows = self.query("SELECT trigger, count(*) FROM episodes GROUP BY 1 ORDER BY 2 DESC")
        result.episodes_by_trigger = {str(r[0]): int(r[1]) for r in rows}
        rows = self.query(
            "SELECT semantic_status, count(*) FROM episodes GROUP BY 1 ORDER BY 2 DESC"
        )
        result.semantic_by_status = {str(r[0]): int(r[1]) for r in rows}
        retried = self.query(
            "SELECT count(*), coalesce(max(retry_count), 0) FROM episodes WHERE retry_count > 0"
        )[0]
        result.episodes_retried, result.max_retry_count = int(retried[0]), int(retried[1])
        result.facts = int(self.query("SELECT count(*) FROM facts")[0][0])
        stuck = self.query(
            "SELECT episode_id, thread_id, start_sequence, end_sequence, status, "
            "semantic_status, retry_count, claimed_by, error, semantic_error FROM episodes "
            "WHERE status IN ('pending', 'processing', 'failed') "
            "OR (completed_at IS NOT NULL AND semantic_status IN ('pending', 'processing', "
            "'failed')) ORDER BY created_at"
        )
        if stuck:
            problems.append(
                f"{len(stuck)} episodes stuck, e.g. "
                + "; ".join(
                    f"{r[0]} thread {r[1]} {r[2]}..{r[3]} {r[4]}/semantic {r[5]} retries {r[6]} "
                    f"claimed_by={r[7]} error={r[8]!r} semantic_error={r[9]!r}"
                    for r in stuck[:5]
                )
            )
        unfinished = self.query(
            "SELECT episode_id, status FROM episodes WHERE completed_at IS NOT NULL "
            "AND (summary IS NULL OR embedding IS NULL)"
        )
        if unfinished:
            problems.append(
                f"{len(unfinished)} completed episodes lack a summary or an embedding, e.g. "
                + ", ".join(f"{r[0]} ({r[1]})" for r in unfinished[:5])
            )
        dangling = self.query(
            "SELECT episode_id, status, claimed_by, semantic_status, semantic_claimed_by "
            "FROM episodes WHERE (claimed_by IS NOT NULL AND status <> 'processing') "
            "OR (semantic_claimed_by IS NOT NULL AND semantic_status <> 'processing')"
        )
        if dangling:
            problems.append(
                f"{len(dangling)} episodes keep a claimant outside processing (a stale claim "
                "write), e.g. "
                + "; ".join(
                    f"{r[0]} {r[1]} claimed_by={r[2]} semantic {r[3]} claimed_by={r[4]}"
                    for r in dangling[:5]
                )
            )
        stray = self.query(
            "SELECT f.fact_id, f.episode_id, f.source_sequence, e.start_sequence, "
            "e.end_sequence FROM facts f JOIN episodes e USING (episode_id) "
            "WHERE f.source_sequence NOT BETWEEN e.start_sequence AND e.end_sequence "
            "OR f.thread_id <> e.thread_id"
        )
        if stray:
            problems.append(
                f"{len(stray)} facts come from outside their episode's window, e.g. "
                + "; ".join(f"fact {r[0]} seq {r[2]} of {r[1]} ({r[3]}..{r[4]})" for r in stray[:5])
            )
        no_current = self.query(
            "SELECT t.thread_id, t.last_sequence FROM threads t WHERE t.last_sequence > 0 "
            "AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.thread_id = t.thread_id "
            "AND e.status = 'completed')"
        )
        if no_current:
            problems.append(
                f"{len(no_current)} threads with messages have no current episode, e.g. "
                + ", ".join(str(r[0]) for r in no_current[:5])
            )
        result.threads_with_messages = int(
            self.query("SELECT count(*) FROM threads WHERE last_sequence > 0")[0][0]
        )
        if result.messages_acked == 0:
            problems.append("no message was acknowledged at all")

    #: The sealed columns the at-rest check counts: (label, table, column).
    _AT_REST: ClassVar[tuple[tuple[str, str, str], ...]] = (
        ("messages", "messages", "content"),
        ("thread labels", "threads", "label"),
        ("summaries", "episodes", "summary"),
        ("facts", "facts", "statement"),
    )

    def check_at_rest(self) -> None:
        """With encryption required: every dataset has a data key, and no stored message,
        thread label, episode summary or fact is in the clear (their first byte says which:
        :data:`~episodic.crypto.SEALED` or :data:`~episodic.crypto.PLAIN`). The messages
        were also opened with their keys (verify)."""
        if not self.cfg.encryption:
            return
        result = self.result
        row = self.query("SELECT count(*), count(key_id) FROM datasets")[0]
        result.datasets_total, result.datasets_encrypted = int(row[0]), int(row[1])
        if result.datasets_encrypted != result.datasets_total:
            clear = self.query("SELECT dataset FROM datasets WHERE key_id IS NULL LIMIT 5")
            result.problems.append(
                f"{result.datasets_total - result.datasets_encrypted} datasets have no data "
                f"key (encryption required), e.g. {', '.join(str(r[0]) for r in clear)}"
            )
        for label, table, column in self._AT_REST:
            counts = self.query(
                f"SELECT count(*) FILTER (WHERE substring({column} FROM 1 FOR 1) = :sealed), "
                f"count(*) FILTER (WHERE substring({column} FROM 1 FOR 1) <> :sealed) "
                f"FROM {table} WHERE {column} IS NOT NULL",
                sealed=SEALED,
            )[0]
            result.values_sealed[label] = int(counts[0])
            result.values_clear[label] = int(counts[1])
            if counts[1]:
                plain = self.query(
                    f"SELECT count(*) FROM {table} WHERE substring({column} FROM 1 FOR 1) = :plain",
                    plain=PLAIN,
                )[0][0]
                result.problems.append(
                    f"{int(counts[1]):,} {label} stored unsealed ({int(plain):,} of them in "
                    f"the clear) with encryption required"
                )

    def check_writes(self) -> None:
        """The stale-write checks over the audit (see :mod:`~episodic.testing.chaos.audit`).
        Every claim a summariser took or ended must have been written by the process its
        worker id names — a summariser woken from a freeze after its claims were reclaimed
        included, which must write nothing for them — and every fact must have been
        committed by the transaction that finished its episode's extraction (one that found
        its claim gone wrote a stale fact). A write whose session the harness never tied to
        a process (opened and closed between two samples) is counted, not judged."""
        if not self.cfg.audit_writes:
            return
        result = self.result
        frozen = {pid: label for _, pid, label in self.frozen}

        def writer(backend: int, started: Any) -> str:
            owner = self.session_owner.get((int(backend), started))
            if owner is None:
                return f"session {backend} (process unknown)"
            woken = " (woken from a freeze)" if owner[0] in frozen else ""
            return f"{owner[1]} pid {owner[0]}{woken}"

        stale: list[str] = []
        for r in self.query(
            "SELECT at, episode_id, kind, old_status, new_status, old_claimant, "
            "new_claimant, backend_pid, backend_start FROM chaos.claim_writes "
            "WHERE app = 'episodic-summariser' ORDER BY seq"
        ):
            at, episode, kind, old, new, old_claimant, new_claimant, backend, started = r
            if old == "processing" and new == "processing":
                result.claim_writes_audited += 1
                stale.append(
                    f"{kind} claim of episode {episode} moved from {old_claimant} to "
                    f"{new_claimant} while processing, by {writer(backend, started)} at "
                    f"{at:%H:%M:%S.%f}"
                )
                continue
            if old == "processing":
                claimant, what = old_claimant, f"ended ({old} -> {new})"
            elif new == "processing":
                claimant, what = new_claimant, f"taken ({old} -> {new})"
            else:
                continue  # not a claim (a completed episode archived, ...)
            result.claim_writes_audited += 1
            owner = self.session_owner.get((int(backend), started))
            if owner is not None:
                result.claim_writes_attributed += 1
            if claimant is None or (owner is not None and claimant_pid(claimant) != owner[0]):
                stale.append(
                    f"{kind} claim of episode {episode} {what} by {writer(backend, started)} "
                    f"at {at:%H:%M:%S.%f}, but the claim was "
                    + (f"{claimant}'s" if claimant else "nobody's")
                )
        if stale:
            result.problems.append(
                f"{len(stale)} stale claim writes (a summariser wrote a claim it did not "
                "hold), e.g. " + "; ".join(stale[:5])
            )
        if self.session_errors:
            log.info("session samples that failed: %s", dict(self.session_errors))

        result.fact_commits_audited = int(
            self.query("SELECT count(*) FROM chaos.fact_commits")[0][0]
        )
        facts = self.query(
            "SELECT episode_id, count(*), min(at), semantic_status, semantic_claimant, "
            "backend_pid, backend_start FROM chaos.fact_commits "
            "WHERE finished_here IS NOT TRUE GROUP BY 1, 4, 5, 6, 7 ORDER BY 3"
        )
        if facts:
            result.problems.append(
                f"{sum(int(r[1]) for r in facts)} facts of {len({r[0] for r in facts})} "
                "episodes committed by a transaction that did not finish the episode's "
                "extraction (its claim was gone: stale writes), e.g. "
                + "; ".join(
                    f"episode {r[0]}: {r[1]} facts at {r[2]:%H:%M:%S.%f} by "
                    f"{writer(r[5], r[6])} while the extraction was {r[3]}, claimed by {r[4]}"
                    for r in facts[:5]
                )
            )

    def check_codes(self) -> None:
        self.result.codes = self.tally.snapshot()
        for rpc, codes in self.result.codes.items():
            allowed = {"OK"} | RETRYABLE | EXPECTED_CODES.get(rpc, frozenset())
            bad = {c: n for c, n in codes.items() if c not in allowed}
            if bad:
                self.result.problems.append(
                    f"clients saw {fmt_counts(bad)} from {rpc} (only OK, "
                    f"{', '.join(sorted(allowed - {'OK'}))} are acceptable); "
                    + "; ".join(f"{code} from {self.tally.where(rpc, code)}" for code in bad)
                )

    def scan_logs(self, logs: dict[str, str]) -> None:
        """Counts the services' ERROR and WARNING lines, ids and numbers blanked out."""
        found: dict[str, Counter[str]] = {" ERROR ": Counter(), " WARNING ": Counter()}
        uuid_re = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        for name, text_ in logs.items():
            service = name.split("-")[0]
            for line in text_.splitlines():
                for level, counter in found.items():
                    if level in line:
                        message = uuid_re.sub("<id>", line.split(level, 1)[1])
                        message = re.sub(r"\d+", "N", message)[:150]
                        counter[f"{service}: {message}"] += 1
        self.result.log_findings = dict(found[" ERROR "])
        self.result.log_warnings = dict(found[" WARNING "])
