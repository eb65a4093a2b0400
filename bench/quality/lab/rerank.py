"""A second reader of Recall's top candidates in the recall lab (the sixth pass): the
packaged local reranker's scores read four ways (``local_rerank_features``), any reader's
order alone or mixed with Recall's relevance (``rerank_order``, ``choose_local_rerank``,
``choose_mix``), and a reader's score as a seventh signal of the second look
(``choose_second_look``), each on both halves."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from bench.harness import locomo
from bench.harness.report import log
from bench.quality.lab.features import candidate_texts, lab_request
from bench.quality.lab.ranking import fit_ranker, score_halves

# -- a local reranker over the top candidates (the sixth pass) ------------------------

RERANK_INPUTS = ("summary", "chunk", "summary+chunk", "best-of-chunks")


def local_rerank_features(
    url: str, conversations: list[locomo.Conversation], rows: list[dict], top: int = 10
) -> list[dict]:
    """For every own question, the local reranker's score of each of Recall's top ``top``
    candidates, read four ways (``RERANK_INPUTS``): the summary (what the HTTP reranker
    reads), the chunk nearest the question (by the stored chunk vectors), both, and the
    best score over every chunk. Cached by the caller."""
    from bench.quality.packaged_reranker import PackagedReranker
    from episodic.config import EmbeddingSettings
    from episodic.providers import make_embedder

    embedder = make_embedder(EmbeddingSettings(embedding_threads=2), 384)
    reranker = PackagedReranker()
    asked = {(c.conversation_id, q.question): (c, q) for c in conversations for q in c.questions}
    own = [r for r in rows if r["kind"] == "own"]
    queries = {}
    for r in own:
        conv, q = asked[(r["conversation"], r["question"])]
        ranked = lab_request(conv.dataset, q).ranked_query
        queries[(r["conversation"], r["question"])] = ranked or q.question
    vectors = embedder.embed(list(queries.values()))
    qvec = dict(zip(queries, vectors, strict=True))
    texts = candidate_texts(url)
    out = []
    started = time.monotonic()
    for n, r in enumerate(own):
        key = (r["conversation"], r["question"])
        query = queries[key]
        v = np.asarray(qvec[key], dtype=np.float32)
        top_c = r["candidates"][:top]
        docs: dict[str, list[str]] = {
            name: [] for name in RERANK_INPUTS if name != "best-of-chunks"
        }
        every: list[tuple[int, str]] = []
        for i, c in enumerate(top_c):
            t = texts[(r["dataset"], c["label"])]
            best = t["chunks"][int(np.argmax(t["vectors"] @ v))] if t["chunks"] else ""
            docs["summary"].append(t["summary"])
            docs["chunk"].append(best or t["summary"])
            docs["summary+chunk"].append((t["summary"] + "\n" + best).strip())
            every += [(i, ch) for ch in t["chunks"]] or [(i, t["summary"])]
        scored = {name: reranker.scores(query, d) for name, d in docs.items()}
        each = reranker.scores(query, [ch for _, ch in every])
        best_of = [
            max(s for (i, _), s in zip(every, each, strict=True) if i == j)
            for j in range(len(top_c))
        ]
        scored["best-of-chunks"] = best_of
        head = [
            {**c, **{f"xenc_{name}": float(scored[name][i]) for name in RERANK_INPUTS}}
            for i, c in enumerate(top_c)
        ]
        out.append({**r, "candidates": head + r["candidates"][top:]})
        if n % 200 == 0:
            log(f"  local rerank: {n}/{len(own)} questions, {time.monotonic() - started:.0f}s")
    return out


def rerank_order(name: str, top: int, mix: float = 1.0) -> Any:
    """Recall's order with its best ``top`` reordered by ``mix`` × the reranker's score
    (min-max over those ``top``) + (1 − ``mix``) × Recall's own relevance (the same)."""

    def rank(c: list[dict]) -> list[str]:
        head, tail = c[:top], c[top:]
        if len(head) < 2:
            return [x["label"] for x in c]

        def norm(values: list[float]) -> list[float]:
            lo, hi = min(values), max(values)
            return [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in values]

        given = norm([x[f"xenc_{name}"] for x in head])
        own = norm([x["relevance"] for x in head])
        score = [mix * g + (1 - mix) * o for g, o in zip(given, own, strict=True)]
        order = sorted(range(len(head)), key=lambda i: (-score[i], i))
        return [head[i]["label"] for i in order] + [x["label"] for x in tail]

    return rank


def choose_local_rerank(rows: list[dict], split: dict[str, set[str]]) -> str:
    """Every input and depth, pure reranker order and a mix with Recall's relevance whose
    share is chosen on the development half by MRR; both halves printed."""
    lines = [
        f"Recall's default: {' / '.join(score_halves(rows, split))}",
        "| input | top k | mix (reranker share) | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for name in RERANK_INPUTS:
        for top in (3, 5, 10):
            pure = score_halves(rows, split, rerank_order(name, top))
            lines.append(
                f"| {name} | {top} | 1 (pure) | {' / '.join(pure[:3])} | {' / '.join(pure[3:])} |"
            )
            best = max(
                (float(score_halves(rows, split, rerank_order(name, top, m))[2]), m)
                for m in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
            )
            cells = score_halves(rows, split, rerank_order(name, top, best[1]))
            lines.append(
                f"| {name} | {top} | {best[1]:.1f} (dev MRR) | {' / '.join(cells[:3])} | {' / '.join(cells[3:])} |"
            )
    return "\n".join(lines)


def choose_mix(rows: list[dict], split: dict[str, set[str]], name: str) -> str:
    """One reader's pure order and its mix with Recall's relevance over the top 3, 5, 10,
    the mix chosen on the development half by MRR; both halves printed."""
    lines = [
        f"Recall's default: {' / '.join(score_halves(rows, split))}",
        "| input | top k | mix (its share) | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|---|---|",
    ]
    for top in (3, 5, 10):
        pure = score_halves(rows, split, rerank_order(name, top))
        lines.append(
            f"| {name} | {top} | 1 (pure) | {' / '.join(pure[:3])} | {' / '.join(pure[3:])} |"
        )
        best = max(
            (float(score_halves(rows, split, rerank_order(name, top, m))[2]), m)
            for m in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
        )
        cells = score_halves(rows, split, rerank_order(name, top, best[1]))
        lines.append(
            f"| {name} | {top} | {best[1]:.2f} (dev MRR) | {' / '.join(cells[:3])} "
            f"| {' / '.join(cells[3:])} |"
        )
    return "\n".join(lines)


def choose_second_look(rows: list[dict], split: dict[str, set[str]], signal: str) -> str:
    """``signal`` (a key every one of the top 10 candidates carries) as a seventh signal of
    the second look (``recall_queries.reorder_top``): the six refitted with it by the
    listwise regression on the development half's top 10, the temperature chosen there by
    MRR, then the default's top 3, 5 or 10 reordered; both halves printed."""
    from episodic.store.recall_queries import DEFAULT_RANKING

    names = (*dict(DEFAULT_RANKING.rerank_weights), *((signal,) if signal else ()))
    head = [{**r, "candidates": r["candidates"][:10]} for r in rows]

    def ordered(weights: dict[str, float], top: int) -> Any:
        # reorder_top's arithmetic (RankingOptions accepts only the statement's signals):
        # 0.7 x exp(fit - ideal fit) + 0.3 x recency over the top k, the ideal 1 on the
        # relative signals and coverages, the best of the k on the cosine and this one
        def rank(c: list[dict]) -> list[str]:
            k = [x for x in c[:top] if all(n in x for n in weights)]
            if len(k) < 2:
                return [x["label"] for x in c]
            ideal = sum(
                w * (max(x[n] for x in k) if n in ("cosine", "phrase", signal) else 1.0)
                for n, w in weights.items()
            )

            def score(x: dict) -> float:
                fit = sum(w * x[n] for n, w in weights.items())
                similarity = math.exp(fit - ideal) if x["lexical"] > 0 or x["semantic"] > 0 else 0
                return 0.7 * similarity + 0.3 * x["recency"]

            reordered = sorted(k, key=score, reverse=True)
            return [x["label"] for x in reordered] + [x["label"] for x in c[len(k) :]]

        return rank

    w = fit_ranker(head, split["dev"], names=names)
    best = max(
        (float(score_halves(rows, split, ordered(dict(zip(names, w * t, strict=True)), 5))[2]), t)
        for t in (0.25, 0.5, 0.75, 1.0)
    )
    weights = dict(zip(names, np.round(w * best[1], 3).tolist(), strict=True))
    lines = [
        f"Recall's default: {' / '.join(score_halves(rows, split))}",
        f"weights (dev, temperature {best[1]}): {weights}",
        "| second look over | dev R@1 / R@5 / MRR | held out R@1 / R@5 / MRR |",
        "|---|---|---|",
    ]
    for top in (3, 5, 10):
        cells = score_halves(rows, split, ordered(weights, top))
        lines.append(f"| top {top} | {' / '.join(cells[:3])} | {' / '.join(cells[3:])} |")
    return "\n".join(lines)
