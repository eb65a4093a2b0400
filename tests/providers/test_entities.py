"""Entity normalisation: one spelling per entity, everywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodic.providers import normalise_entities, normalise_entity


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
