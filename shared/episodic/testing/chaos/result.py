"""What a chaos run returns: :class:`ChaosResult` (every figure, the faults injected as
:class:`FaultRecord` and the problems found) and its report as a table."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from episodic.testing.chaos.config import FAULT_KINDS, ChaosConfig


@dataclass
class FaultRecord:
    """One injected fault: when (seconds after the load started), what, how long it took
    until the suite had its part back, and whether the injection itself worked."""

    at: float
    kind: str
    detail: str
    duration: float
    ok: bool


@dataclass
class ChaosResult:
    """Every figure of a run, and the problems found (empty: nothing lost or broken)."""

    config: ChaosConfig
    seed: int
    workdir: Path | None = None
    messages_acked: int = 0
    messages_stored: int = 0
    replayed_receipts: int = 0  # receipts with stored=False (a retry of a stored batch)
    add_calls_ok: int = 0
    threads_created: int = 0
    threads_with_messages: int = 0
    end_thread_ok: int = 0
    end_thread_without_episode_id: int = 0  # the Scheduler did not answer in time
    # EndThread calls after which the thread had a window ending exactly at the writer's
    # last message (the checkpoint kept), out of all that had messages.
    checkpoints_kept: int = 0
    checkpoints: int = 0
    checkpoints_merged: list[str] = field(default_factory=list)  # the first few not kept
    episodes_total: int = 0
    episodes_by_status: dict[str, int] = field(default_factory=dict)
    episodes_by_trigger: dict[str, int] = field(default_factory=dict)
    semantic_by_status: dict[str, int] = field(default_factory=dict)
    episodes_retried: int = 0  # episodes with retry_count > 0 (failed or reclaimed attempts)
    facts: int = 0  # stored by semantic extraction
    max_retry_count: int = 0
    faults: list[FaultRecord] = field(default_factory=list)
    freeze_classes: dict[str, int] = field(default_factory=dict)  # what frozen sessions did
    # Stale-write audit: claims taken or ended by summarisers (and how many of those the
    # harness could tie to a process), facts committed.
    claim_writes_audited: int = 0
    claim_writes_attributed: int = 0
    fact_commits_audited: int = 0
    codes: dict[str, dict[str, int]] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    proxy: dict[str, int] = field(default_factory=dict)
    startup_seconds: float = 0.0
    load_seconds: float = 0.0
    quiescence_seconds: float | None = None  # after the load; None: never settled
    settled_by_loops: bool = False
    verify_seconds: float = 0.0
    total_seconds: float = 0.0
    log_findings: dict[str, int] = field(default_factory=dict)  # ERROR lines
    log_warnings: dict[str, int] = field(default_factory=dict)  # WARNING lines
    # Encryption at rest: datasets with a data key (of all), and stored values by column,
    # sealed and in the clear (only checked with ChaosConfig.encryption).
    datasets_encrypted: int = 0
    datasets_total: int = 0
    values_sealed: dict[str, int] = field(default_factory=dict)
    values_clear: dict[str, int] = field(default_factory=dict)
    # Auth: API keys minted by role, and what the probe before the load was answered.
    api_keys: dict[str, int] = field(default_factory=dict)
    auth_probe: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def faults_by_kind(self) -> dict[str, int]:
        counts = Counter(f.kind for f in self.faults if f.ok)
        return {k: counts[k] for k in FAULT_KINDS if counts[k]}

    def figures(self) -> list[tuple[str, str]]:
        """The figures as (name, value) rows, in reading order."""
        cfg = self.config
        rows: list[tuple[str, str]] = [
            ("seed", str(self.seed)),
            (
                "setup",
                f"{cfg.replicas} replicas of each service, {cfg.writers} writers, "
                f"{cfg.readers} readers, {cfg.datasets} datasets",
            ),
            ("security", cfg.security()),
            *self._security_rows(),
            ("messages acknowledged", f"{self.messages_acked:,}"),
            ("messages stored", f"{self.messages_stored:,}"),
            ("AddMessages calls answered", f"{self.add_calls_ok:,}"),
            ("receipts of replays (retries)", f"{self.replayed_receipts:,}"),
            (
                "threads",
                f"{self.threads_created:,} created, {self.threads_with_messages:,} with "
                f"messages, {self.end_thread_ok:,} EndThread "
                f"({self.end_thread_without_episode_id} answered without an episode id)",
            ),
            (
                "EndThread checkpoints kept",
                f"{self.checkpoints_kept:,} of {self.checkpoints:,} have a window ending at "
                "the thread's last message before the call",
            ),
            *(("  not kept", line) for line in self.checkpoints_merged),
            ("episodes", f"{self.episodes_total:,} " + fmt_counts(self.episodes_by_status)),
            ("episodes by trigger", fmt_counts(self.episodes_by_trigger)),
            ("semantic status", fmt_counts(self.semantic_by_status) + f"; {self.facts:,} facts"),
            (
                "episodes retried",
                f"{self.episodes_retried:,} (failed or reclaimed attempts; most "
                f"{self.max_retry_count})",
            ),
            ("faults injected", fmt_counts(self.faults_by_kind())),
        ]
        for f in self.faults:
            rows.append(
                (
                    f"  at {f.at:6.1f}s {f.kind}",
                    f"{'ok' if f.ok else 'FAILED'} {f.duration:.1f}s {f.detail}",
                )
            )
        rows.append(("freezes by class", fmt_counts(self.freeze_classes)))
        rows.append(
            (
                "stale-write audit",
                f"{self.claim_writes_audited:,} summariser claim writes "
                f"({self.claim_writes_attributed:,} tied to their process), "
                f"{self.fact_commits_audited:,} facts",
            )
        )
        rows.append(("proxy", fmt_counts(self.proxy)))
        rows.append(("unexpected process exits", str(len(self.unexpected_exits))))
        rows.append(("client codes", ""))
        for rpc in sorted(self.codes):
            rows.append((f"  {rpc}", fmt_counts(self.codes[rpc])))
        rows += [
            ("startup", f"{self.startup_seconds:.1f}s"),
            ("load", f"{self.load_seconds:.1f}s"),
            (
                "time to quiescence",
                "never"
                if self.quiescence_seconds is None
                else f"{self.quiescence_seconds:.1f}s"
                + ("" if self.settled_by_loops else " (needed RunSweep/EndThread)"),
            ),
            ("verification", f"{self.verify_seconds:.1f}s"),
            ("total", f"{self.total_seconds:.1f}s"),
        ]
        for title, findings in (
            ("service log ERRORs", self.log_findings),
            ("service log WARNINGs", self.log_warnings),
        ):
            if findings:
                rows.append((title, ""))
                for line, n in sorted(findings.items(), key=lambda kv: -kv[1])[:15]:
                    rows.append((f"  {n:,}x", line))
        rows.append(("problems", str(len(self.problems))))
        return rows

    def _security_rows(self) -> list[tuple[str, str]]:
        cfg = self.config
        rows: list[tuple[str, str]] = []
        if cfg.encryption:
            rows.append(
                (
                    "sealed at rest",
                    f"{self.datasets_encrypted:,} of {self.datasets_total:,} datasets with a "
                    f"data key; sealed {fmt_counts(self.values_sealed)}; in the clear "
                    f"{fmt_counts(self.values_clear) if any(self.values_clear.values()) else '0'}",
                )
            )
        if cfg.auth:
            rows.append(("API keys", fmt_counts(self.api_keys)))
            rows.append(("auth probe", self.auth_probe or "not run"))
        return rows

    def report(self) -> str:
        """The figures as a table, then every problem."""
        rows = self.figures()
        width = max(len(name) for name, _ in rows)
        lines = [f"{name.ljust(width)}  {value}" for name, value in rows]
        for problem in self.problems:
            lines.append(f"PROBLEM: {problem}")
        if self.workdir is not None:
            lines.append(f"logs: {self.workdir / 'logs'}")
        return "\n".join(lines)


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}={v:,}" for k, v in counts.items()) or "-"
