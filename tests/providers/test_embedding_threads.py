"""The in-process model's thread count: explicit when set, else chosen by the work (bulk
embedding gets the process's share of the cores, queries one thread)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from episodic.config import EmbeddingSettings
from episodic.providers import E5Embedder, HashingEmbedder, MiniLMEmbedder, make_embedder
from episodic.providers.factory import (
    MAX_AUTO_THREADS,
    cpu_share,
    embedding_threads,
    make_dataset_embedders,
)


def _affinity() -> int:
    return len(os.sched_getaffinity(0))


def test_an_explicit_setting_is_used_for_every_kind_of_work() -> None:
    settings = EmbeddingSettings(embedding_threads=3)
    assert embedding_threads(settings, bulk=True) == 3
    assert embedding_threads(settings, bulk=False) == 3


def test_automatic_threads_give_bulk_work_the_share_of_the_cores_and_queries_one() -> None:
    settings = EmbeddingSettings()
    assert settings.embedding_threads == 0, "the default is automatic"
    assert embedding_threads(settings, bulk=False) == 1
    assert embedding_threads(settings, bulk=True) == min(MAX_AUTO_THREADS, cpu_share())


def test_the_summariser_kind_of_embedder_is_built_with_the_automatic_count() -> None:
    settings = EmbeddingSettings(embedding_provider="minilm")
    bulk = make_embedder(settings, 384, bulk=True)
    query = make_embedder(settings, 384)
    assert isinstance(bulk, MiniLMEmbedder) and isinstance(query, MiniLMEmbedder)
    assert bulk.threads == min(MAX_AUTO_THREADS, cpu_share())
    assert query.threads == 1


def _cgroup_v2(root: Path, cpu_max: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "cpu.max").write_text(cpu_max + "\n")
    return root


def _cgroup_v1(root: Path, quota_us: int, period_us: int) -> Path:
    (root / "cpu").mkdir(parents=True, exist_ok=True)
    (root / "cpu" / "cpu.cfs_quota_us").write_text(f"{quota_us}\n")
    (root / "cpu" / "cpu.cfs_period_us").write_text(f"{period_us}\n")
    return root


@pytest.mark.parametrize(
    ("cpu_max", "limit_cores"),
    [("100000 100000", 1), ("150000 100000", 1), ("250000 100000", 2), ("50000 100000", 1)],
)
def test_cgroup_v2_cpu_max_limits_the_share(tmp_path: Path, cpu_max: str, limit_cores: int) -> None:
    root = _cgroup_v2(tmp_path / "cg", cpu_max)
    assert cpu_share(root) == min(_affinity(), limit_cores)


def test_cgroup_v2_without_a_limit_leaves_the_affinity(tmp_path: Path) -> None:
    root = _cgroup_v2(tmp_path / "cg", "max 100000")
    assert cpu_share(root) == _affinity()


def test_cgroup_v1_quota_limits_the_share_and_minus_one_means_none(tmp_path: Path) -> None:
    assert cpu_share(_cgroup_v1(tmp_path / "limited", 100000, 100000)) == 1
    assert cpu_share(_cgroup_v1(tmp_path / "unlimited", -1, 100000)) == _affinity()


def test_no_cgroup_files_leave_the_affinity(tmp_path: Path) -> None:
    assert cpu_share(tmp_path / "absent") == _affinity()


def test_datasets_in_other_languages_get_the_multilingual_model_beside_minilm_only() -> None:
    """EPISODIC_EMBEDDING_MULTILINGUAL=auto (the default) puts e5 beside MiniLM; with it
    off, or another store model (whose vectors e5's would not share), there is none."""
    minilm = MiniLMEmbedder()
    on = make_dataset_embedders(EmbeddingSettings(), minilm)
    assert isinstance(on.multilingual, E5Embedder)
    assert on.model_for("french") == on.multilingual.name
    assert on.model_for("english") is None
    off = EmbeddingSettings(embedding_multilingual="off")
    assert make_dataset_embedders(off, minilm).multilingual is None
    hashing = EmbeddingSettings(embedding_provider="hashing")
    assert make_dataset_embedders(hashing, HashingEmbedder(384)).multilingual is None
