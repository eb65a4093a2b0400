"""What a recall reads before its ranking, in one statement (recall_queries.read_opening):
the same key, the same query tokens and the same size probe the separate statements read,
for datasets sealed with a key and in the clear, and never stale after a write."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from episodic.crypto import ClearKey
from episodic.query_focus import word_forms
from episodic.services.recall import domain
from episodic.store import erasure
from episodic.store import recall_queries as q
from episodic.store.recall_index import query_tokens, weighted_query_tokens
from episodic.store.recall_queries import Approximation, RecallFilters
from episodic.testing.keys import test_vault
from tests.recall.factory import EMBEDDER, T0, make_episode

QUERIES = [
    "what did we discuss about the zebra invoices?",
    "Running runners ran; the runner's run",
    "",  # no lexeme at all
    "when and how — remember?",  # generic question words only
    "What things did Evan have broken? He ran.",  # irregular forms: broke, break, run
]


def _key(vault, dataset, opening):  # type: ignore[no-untyped-def]
    row = opening.key_row
    if row is None:
        return ClearKey(dataset)
    return vault.key_of(dataset, row["key_id"], row["master_key_id"], row["wrapped_key"])


@pytest.mark.parametrize("encrypted", [True, False])
def test_the_opening_reads_what_the_separate_statements_read(
    engine: Engine, encrypted: bool
) -> None:
    vault = test_vault(encrypt=encrypted)
    with engine.begin() as conn:
        vault.for_write(conn, "ds")  # registered with a data key, or in the clear
        for i in range(5):
            make_episode(conn, "ds", [f"the zebra invoice {i} was paid"], ended_at=T0)
    with engine.connect() as conn:
        separate_key = vault.for_read(conn, "ds", fresh=True)
        for query in QUERIES:
            for generic in (False, True):
                opening = q.read_opening(conn, "ds", query=query, size_bound=4, generic=generic)
                key = _key(vault, "ds", opening)
                assert key.key_id == separate_key.key_id
                assert (key.key_id is None) is not encrypted
                blinded = q.blinded_lexemes(key, opening.lexemes or [])
                assert [t for t, _ in blinded] == query_tokens(conn, separate_key, query)
                if generic:
                    assert blinded == weighted_query_tokens(conn, separate_key, query)
                # With the query's word forms, the terms query_terms reads, in one statement.
                options = q.RankingOptions(word_forms=True, weight_generic_terms=generic)
                with_forms = q.read_opening(
                    conn, "ds", query=query, size_bound=4, generic=generic, forms=word_forms(query)
                )
                terms = q.query_term_tokens(key, with_forms.lexemes or [], with_forms.forms or [])
                assert terms == q.query_terms(conn, separate_key, query, options)
                if "broken" in query:  # "broke", "break" and "ran"'s "run" join the query's own
                    assert len(terms) > len(with_forms.lexemes or [])
                assert (with_forms.forms is not None) is bool(word_forms(query))
                # The probe counts as count_up_to does, up to its bound.
                assert opening.size == q.count_up_to(conn, "ds", 4) == 4
        assert q.read_opening(conn, "ds", query=None, size_bound=100).size == 5
        bare = q.read_opening(conn, "ds", query=None, size_bound=None)
        assert bare.lexemes is None and bare.size is None
        # A dataset with no row yet: no key row, nothing counted, the query still parsed.
        unknown = q.read_opening(conn, "nobody", query="zebra invoices", size_bound=10)
        assert unknown.key_row is None and unknown.size == 0
        assert [lexeme for lexeme, _ in unknown.lexemes or []] == ["invoic", "zebra"]


def test_a_recall_after_the_dataset_is_created_again_uses_the_new_key(engine: Engine) -> None:
    """A dataset erased and created again gets a new key: the next recall of the same
    reader must blind its query and open its rows with the new key."""
    vault = test_vault()
    with engine.begin() as conn:
        make_episode(conn, "ds", ["the zebra invoice was paid"], ended_at=T0)
    request = domain.RecallQuery(
        dataset="ds",
        query="zebra invoice",
        include_episodes=True,
        limit=3,
        similarity_weight=0.7,
        recency_weight=0.3,
        filters=RecallFilters(as_of=T0 + timedelta(hours=1)),
    )
    vector = EMBEDDER.embed_query("zebra invoice")
    sizes = domain.DatasetSizes(1000, Approximation())
    with engine.connect() as conn:
        first = domain.recall(conn, vault, request, vector, sizes)
        assert [r["summary"] for r in first.rows] == ["the zebra invoice was paid"]
    # Erased and created again (a new data key), behind the reader's cache.
    erasure.erase_dataset(engine, "ds", actor="test")
    with engine.begin() as conn:
        make_episode(conn, "ds", ["a zebra invoice again"], ended_at=T0)
    with engine.connect() as conn:
        again = domain.recall(conn, vault, request, vector, sizes)
    assert [r["summary"] for r in again.rows] == ["a zebra invoice again"]
    assert again.rows[0]["lexical"] > 0  # the query's words were blinded with the new key


def test_a_dataset_seen_once_is_not_probed_again(engine: Engine) -> None:
    """The size probe rides on the first call's opening; later calls send none (the
    ranking statement's count keeps the size current)."""
    with engine.begin() as conn:
        for i in range(3):
            make_episode(conn, "ds", [f"zebra {i}"], ended_at=T0)
    sizes = domain.DatasetSizes(2, Approximation(candidates=4, recent=3))
    assert sizes.probe_bound("ds") == 3
    assert sizes.path_probed("ds", 3) is sizes.approximation  # 3 > 2
    assert sizes.probe_bound("ds") is None
    assert sizes.path_probed("ds", None) is sizes.approximation
    sizes.saw("ds", 2)  # the ranking saw it shrink
    assert sizes.path_probed("ds", None) is None
