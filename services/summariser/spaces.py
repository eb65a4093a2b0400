"""A dataset's embedding model follows its language (issue 40).

With a multilingual model on (``EPISODIC_EMBEDDING_MULTILINGUAL=auto``, the default beside
MiniLM), a dataset whose language is not English is embedded by it
(providers/dataset_embedders.py), and ``datasets.embedding_model`` records which model made
its vectors (store/embedding_space.py, "A dataset's own space").

A dataset's language is usually settled by its first episode (detected from its text, or
set through SetDatasetPolicy), before any of its vectors exist, and then nothing moves.
When vectors exist already (the first threads were too short to tell the language, or a
caller set it later), the Summariser moves the dataset: :func:`follow_language` re-embeds
every vector of the dataset with the model its language calls for, in one transaction
holding the dataset's language lock exclusively, and records the model in the same
transaction. Whatever else writes the dataset's vectors (a completion, the chunk index,
events) holds that lock shared and compares the model under it, so no vector of the old
model lands after the move; Recall reads the model on each call, so its query meets
vectors of its own model before and after the commit.

The Summariser moves only a small dataset (:data:`MAX_MOVED_EPISODES`: the move holds the
dataset's writers back while it embeds); a larger one keeps its model and the Summariser
says so once. ``episodic reindex --reembed --dataset D`` moves one of any size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import Engine, text

from episodic.providers.dataset_embedders import ENGLISH, DatasetEmbedders
from episodic.providers.embedding import token_access
from episodic.store import embedding_space
from episodic.store.episodes import has_more_episodes_than
from episodic.store.recall_index import hold_language
from episodic.store.vault import Vault

from . import reembed  # the module: reembed imports episode_vector, which imports this one

log = logging.getLogger(__name__)

#: A dataset moves to another model only while it has at most this many embedded
#: episodes: the move re-embeds all of them (and their chunks) in one transaction, and the
#: dataset's completions wait meanwhile (~2.5 s an episode with e5 on this machine).
MAX_MOVED_EPISODES = 50

_TOO_LARGE_LOGGED: set[tuple[str, str | None]] = set()


@dataclass(frozen=True)
class Followed:
    """What :func:`follow_language` found, and did."""

    #: The dataset exists (False: nothing was read or done).
    found: bool
    #: Its text-search configuration ('' when not found).
    language: str = ""
    #: Its embedding model afterwards (None: the store's).
    model: str | None = None
    #: What the move re-embedded (None: it did not move).
    moved: reembed.ReembedReport | None = None
    #: Why it keeps a model its language does not call for ('' when it needs no move or
    #: moved): another transaction holds its language, the store itself is moving, or it
    #: is too large for the Summariser to move.
    kept_because: str = ""


def follow_language(
    engine: Engine,
    vault: Vault,
    embedders: DatasetEmbedders,
    dataset: str,
    *,
    late: bool,
    capped: bool = True,
) -> Followed:
    """Moves ``dataset`` to the model its language calls for when it is in another one.
    One read when nothing moves (every episode pays only that). ``late``: chunk vectors by
    late chunking where the new model can.

    The Summariser's way (``capped``): when another transaction holds the dataset's
    language (a switch, or another worker moving it) nothing is done now, the next episode
    asks again; a dataset of more than :data:`MAX_MOVED_EPISODES` embedded episodes keeps
    its model. The operator's (``episodic reindex --reembed --dataset``, not ``capped``):
    waits for the language lock and moves a dataset of any size, its writers waiting
    meanwhile."""
    with engine.begin() as conn:
        row = conn.execute(
            text("SELECT text_search_config, embedding_model FROM datasets WHERE dataset = :d"),
            {"d": dataset},
        ).first()
        if row is None:
            return Followed(found=False)
        language = row[0] or ENGLISH
        wanted, current = embedders.model_for(language), row[1]
        if wanted == current:
            return Followed(True, language, current)
        if not hold_language(conn, dataset, exclusive=True, wait=not capped):
            return Followed(True, language, current, kept_because="its language is held")
        # read again under the lock: another worker may have moved it meanwhile
        row = conn.execute(
            text("SELECT text_search_config, embedding_model FROM datasets WHERE dataset = :d"),
            {"d": dataset},
        ).one()
        language = row[0] or ENGLISH
        wanted, current = embedders.model_for(language), row[1]
        if wanted == current:
            return Followed(True, language, current)
        if wanted is None:  # back to the store's model: not while the store itself moves
            space = embedding_space.read(conn)
            if space is not None and space.reembedding_to is not None:
                return Followed(True, language, current, kept_because="the store is moving")
        if capped and has_more_episodes_than(conn, dataset, MAX_MOVED_EPISODES, embedded=True):
            if (dataset, wanted) not in _TOO_LARGE_LOGGED:
                _TOO_LARGE_LOGGED.add((dataset, wanted))
                log.warning(
                    "dataset %s is in %s, whose vectors %s makes, but it has more than %d "
                    "embedded episodes to move: it keeps %s (episodic reindex --reembed "
                    "--dataset %s moves it)",
                    dataset,
                    language,
                    wanted or "the store's model",
                    MAX_MOVED_EPISODES,
                    current or "the store's model",
                    dataset,
                )
            return Followed(
                True,
                language,
                current,
                kept_because=f"it has more than {MAX_MOVED_EPISODES} embedded episodes",
            )
        embedder = embedders.get(wanted)
        report = reembed.reembed_dataset(
            conn, vault, embedder, dataset, late=late and token_access(embedder)
        )
        embedding_space.set_dataset_model(conn, dataset, wanted)
    log.info(
        "dataset %s (%s) moved to %s: %d episode, %d chunk and %d event vector(s) re-embedded",
        dataset,
        language,
        embedder.name,
        report.episodes,
        report.chunks,
        report.events,
    )
    return Followed(True, language, wanted, moved=report)
