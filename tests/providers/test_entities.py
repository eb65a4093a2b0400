"""Entity normalisation: one spelling per entity, everywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodic.providers import normalise_entities, normalise_entity
from episodic.providers.entities import entity_match_key


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Project Atlas", "project atlas"),
        ("project  atlas", "project atlas"),
        ("  PROJECT\tAtlas\n", "project atlas"),
        ("Atlas project", "project atlas"),  # seed 002's "entity drift"
        ("atlas Project", "project atlas"),
        ("project:Atlas", "project:atlas"),
        ("Project: Atlas", "project:atlas"),
        ("invoice:#42", "invoice:#42"),
        ("#42", "#42"),
        ("@Alice.", "@alice"),
        ("“Toyota Corolla”,", "toyota corolla"),
        ("$30k.", "$30k"),
        ("20%", "20%"),
        ("Atlas (v2)", "atlas (v2)"),
        ("ＡＴＬＡＳ", "atlas"),  # full-width (NFKC)
        ("Straße", "strasse"),  # case folding
        ("O’Brien", "o'brien"),
        ("side project", "project side"),
        ("project ticket", "project ticket"),
        ("...", ""),
        ("", ""),
    ],
)
def test_normalise_entity(raw: str, expected: str) -> None:
    assert normalise_entity(raw) == expected


def test_normalise_entities_sorted_unique_without_empties() -> None:
    assert normalise_entities(["Project Atlas", "atlas project", "  ", "Bob", "bob!"]) == [
        "bob",
        "project atlas",
    ]


@given(st.text())
def test_normalise_entity_is_idempotent(raw: str) -> None:
    once = normalise_entity(raw)
    assert normalise_entity(once) == once


@given(st.text(alphabet=st.characters(categories=["L", "N", "Zs", "P"]), max_size=40))
def test_normalised_entity_has_no_edge_whitespace_or_double_spaces(raw: str) -> None:
    out = normalise_entity(raw)
    assert out == out.strip()
    assert "  " not in out


# ---- match keys: which spellings the canon files under one entity -----------------------


@pytest.mark.parametrize(
    ("spellings", "key"),
    [
        # case, word order, articles, generic head nouns (the example)
        (["project Atlas", "Atlas project", "atlas", "the Atlas project", "ATLAS"], "atlas"),
        (["Acme Corp", "Acme Inc.", "acme company", "the Acme team", "Acme"], "acme"),
        (["Atlas's", "Atlas'", "atlas’s"], "atlas"),  # a possessive at the end
        (["atlas-web", "atlas_web", "Atlas web"], "atlas web"),  # joiners
        (["Atlas Projects", "atlas projects"], "atlas"),  # a plural head noun
        (["“Atlas”,", "Atlas."], "atlas"),  # punctuation at the edges
        (["Mark and Josh", "Josh and Mark", "josh & mark"], "josh and mark"),  # a pair
    ],
)
def test_spellings_of_one_thing_share_a_match_key(spellings: list[str], key: str) -> None:
    assert {entity_match_key(s) for s in spellings} == {key}


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("Alex", "Alexandra"),  # no prefixes or edit distance: an admin merges these
        ("James", "Jame"),  # no stemming: names end in s
        ("project 2", "team 2"),  # a head noun stays when only a number is left
        ("Alex's team", "Alex"),  # a possessive inside the name: the team is not Alex
        ("ticket #42", "invoice #42"),  # ticket, invoice, issue are not generic
        ("#42", "42"),  # ids are exact
        ("invoice:#42", "invoice #42"),  # kind:value forms are exact
        ("the team", "team alpha"),
        ("Atlas", "Atlas 2"),
        ("Team of Rivals", "Rivals"),  # the head noun is part of the name
        ("Project and Team", "Team"),
    ],
)
def test_different_things_keep_different_match_keys(one: str, other: str) -> None:
    assert entity_match_key(one) != entity_match_key(other)


@pytest.mark.parametrize("lonely", ["project", "the team", "company", "The", "a"])
def test_a_generic_word_alone_is_its_own_key(lonely: str) -> None:
    assert entity_match_key(lonely) == normalise_entity(lonely).removeprefix("the ").strip()


@given(st.text(max_size=60))
def test_match_key_is_idempotent(raw: str) -> None:
    once = entity_match_key(raw)
    assert entity_match_key(once) == once
