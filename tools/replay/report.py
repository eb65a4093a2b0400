"""What a replay reports: per thread (:class:`ThreadDiff`: the windows, the summaries'
similarity, the entities added and removed), per query (:class:`QueryDiff`: the top-k
threads over the old and the new episodes, their overlap) and in all (:class:`ReplayReport`),
as ``episodic replay --json`` prints it and as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SIMILARITY_MEASURE = (
    "cosine of the two current summaries' vectors, in the model of the replayed dataset's language"
)


@dataclass
class Window:
    start: int
    end: int
    trigger: str
    status: str

    def __str__(self) -> str:
        return f"{self.start}-{self.end}"


@dataclass
class ThreadDiff:
    """How one thread's episodes changed."""

    thread_id: str
    label: str
    messages: int
    old_windows: list[Window]
    new_windows: list[Window]
    summary_similarity: float | None
    entities_added: list[str]
    entities_removed: list[str]
    uncovered_at_export: list[int] | None = None  # [start, end] no old episode covered
    skipped: str = ""

    @property
    def windows_identical(self) -> bool:
        return [(w.start, w.end) for w in self.old_windows] == [
            (w.start, w.end) for w in self.new_windows
        ]


@dataclass
class QueryDiff:
    """The top-k threads of one query over the old and the new episodes."""

    query: str
    k: int
    old: list[str]
    new: list[str]

    @property
    def overlap(self) -> float:
        """Shared threads over the ranks filled (1.0 when both are empty)."""
        filled = max(len(self.old), len(self.new))
        return len(set(self.old) & set(self.new)) / filled if filled else 1.0


@dataclass
class ReplayReport:
    dataset: str
    exported_at: str | None
    export_complete: bool
    clock: str
    settings: dict[str, Any]
    threads: list[ThreadDiff]
    queries: list[QueryDiff]
    old_episodes: int
    new_episodes: int
    failed_episodes: int

    def as_json(self) -> dict[str, Any]:
        similarities = [t.summary_similarity for t in self.threads if t.summary_similarity]
        return {
            "dataset": self.dataset,
            "exported_at": self.exported_at,
            "export_complete": self.export_complete,
            "clock": self.clock,
            "settings": self.settings,
            "summary_similarity_measure": SIMILARITY_MEASURE,
            "totals": {
                "threads": len(self.threads),
                "threads_replayed": sum(1 for t in self.threads if not t.skipped),
                "windows_identical": sum(
                    1 for t in self.threads if not t.skipped and t.windows_identical
                ),
                "old_episodes": self.old_episodes,
                "new_episodes": self.new_episodes,
                "new_episodes_failed": self.failed_episodes,
                "mean_summary_similarity": (
                    round(sum(similarities) / len(similarities), 4) if similarities else None
                ),
                "mean_overlap": (
                    round(sum(q.overlap for q in self.queries) / len(self.queries), 4)
                    if self.queries
                    else None
                ),
            },
            "threads": [
                {
                    "thread_id": t.thread_id,
                    "label": t.label,
                    "messages": t.messages,
                    "skipped": t.skipped or None,
                    "windows_identical": t.windows_identical,
                    "old_windows": [vars(w) for w in t.old_windows],
                    "new_windows": [vars(w) for w in t.new_windows],
                    "uncovered_at_export": t.uncovered_at_export,
                    "summary_similarity": t.summary_similarity,
                    "entities_added": t.entities_added,
                    "entities_removed": t.entities_removed,
                }
                for t in self.threads
            ],
            "recall": [
                {
                    "query": q.query,
                    "k": q.k,
                    "old": q.old,
                    "new": q.new,
                    "overlap": round(q.overlap, 4),
                }
                for q in self.queries
            ],
        }

    def render(self) -> str:
        data = self.as_json()
        totals = data["totals"]
        out = [
            f"replay of dataset {self.dataset} (exported {self.exported_at or '?'}"
            + ("" if self.export_complete else ", INCOMPLETE export: no end line")
            + f"), clock: {self.clock}",
            "pipeline: " + ", ".join(f"{k} {v}" for k, v in self.settings.items() if k != "recall"),
            f"episodes: {self.old_episodes} old, {self.new_episodes} new"
            + (f" ({self.failed_episodes} failed)" if self.failed_episodes else ""),
            f"windows identical in {totals['windows_identical']} of "
            f"{totals['threads_replayed']} threads",
        ]
        if totals["mean_summary_similarity"] is not None:
            out.append(
                f"summary similarity ({SIMILARITY_MEASURE}): mean "
                f"{totals['mean_summary_similarity']:.3f}"
            )
        out.append("")
        for t in self.threads:
            name = t.thread_id + (f' "{t.label}"' if t.label else "")
            if t.skipped:
                out.append(f"  {name}: skipped ({t.skipped})")
                continue
            mark = "same windows" if t.windows_identical else "WINDOWS DIFFER"
            similarity = (
                f", summary similarity {t.summary_similarity:.3f}"
                if t.summary_similarity is not None
                else ""
            )
            count = f"{t.messages} message" + ("" if t.messages == 1 else "s")
            out.append(f"  {name}: {count}, {mark}{similarity}")
            if not t.windows_identical:
                out.append(f"      old: {_windows(t.old_windows)}")
                out.append(f"      new: {_windows(t.new_windows)}")
            if t.uncovered_at_export:
                start, end = t.uncovered_at_export
                out.append(f"      messages {start}-{end} had no old episode at export")
            if t.entities_added or t.entities_removed:
                changes = [f"+{e}" for e in t.entities_added] + [
                    f"-{e}" for e in t.entities_removed
                ]
                out.append(f"      entities: {' '.join(changes)}")
        if self.queries:
            out.append("")
            out.append(
                f"recall, top {self.queries[0].k} threads (old → new), mean overlap "
                f"{totals['mean_overlap']:.2f}:"
            )
            labels = {t.thread_id: t.label for t in self.threads}

            def ranked(ids: list[str]) -> str:
                return ", ".join(
                    f"{i[:8]}" + (f' "{labels[i]}"' if labels.get(i) else "") for i in ids
                )

            for q in self.queries:
                out.append(f"  {q.query!r}: overlap {q.overlap:.2f}")
                out.append(f"      old: {ranked(q.old) or '(none)'}")
                out.append(f"      new: {ranked(q.new) or '(none)'}")
        return "\n".join(out)


def _windows(windows: list[Window]) -> str:
    return " ".join(f"{w.start}-{w.end} ({w.trigger})" for w in windows) or "(none)"
