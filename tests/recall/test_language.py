"""A dataset's language: its lexical index and its queries are stemmed with the dataset's
text-search configuration (migration 0007), sealed datasets included, and changing the
language re-tokenises what is already indexed."""

from __future__ import annotations

import grpc
import pytest
from sqlalchemy import text

from episodic.errors import InvalidArgument
from episodic.store.languages import dataset_config, resolve_language, set_language
from episodic.testing import keys
from episodic.v1 import admin_service_pb2 as admin_pb
from episodic.v1 import admin_service_pb2_grpc as admin_grpc
from tests.recall.factory import lexical_coverage, make_episode

BOOKED = [
    "Nous avons réservé les billets d'avion pour Lisbonne.",
    "Parfait, le vol part de Lyon à 6 h 50.",
]
GARDEN = ["Le jardin a besoin d'être arrosé tous les jours en juillet."]
#: Other inflections than the conversation's: "réserver" / "réservé", "billet" / "billets".
QUESTION = "réserver le billet"


def test_languages_resolve_to_a_stemmer_or_simple(engine) -> None:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        assert resolve_language(conn, "fr") == "french"
        assert resolve_language(conn, "fr-CA") == "french"
        assert resolve_language(conn, "de") == "german"
        assert resolve_language(conn, "Spanish") == "spanish"
        assert resolve_language(conn, "pt_BR") == "portuguese"
        # No stemmer in PostgreSQL: words as written.
        assert resolve_language(conn, "ja") == "simple"
        assert resolve_language(conn, "klingon") == "simple"
        for bad in ("", "!!", "fr;drop", "x" * 80):
            with pytest.raises(InvalidArgument):
                resolve_language(conn, bad)


def test_a_french_dataset_is_stemmed_in_french_sealed_or_not(engine) -> None:  # type: ignore[no-untyped-def]
    vault = keys.test_vault()
    with engine.begin() as conn:
        vault.for_write(conn, "fr_user")
        assert set_language(conn, vault, "fr_user", "french")
        make_episode(conn, "fr_user", BOOKED)
        make_episode(conn, "fr_user", GARDEN)
        make_episode(conn, "en_user", BOOKED)  # the default: english
    with engine.connect() as conn:
        assert dataset_config(conn, "fr_user") == "french"
        assert dataset_config(conn, "en_user") == "english"
        french = lexical_coverage(conn, "fr_user", QUESTION)
        english = lexical_coverage(conn, "en_user", QUESTION)
        booked = " ".join(BOOKED)
        # french: "réserver" and "réservé" share the stem, "le" is a stop word.
        assert french[booked] == (1.0, 1.0)
        assert french[" ".join(GARDEN)] == (0.0, 0.0)
        # english does not stem French: only "billet(s)" matches, "le" counts as a word.
        assert english[booked][0] < 1.0
        # Sealed: the index holds blind tokens, not the French stems.
        stored = conn.execute(
            text(
                "SELECT string_agg(search_vector::text, ' ') FROM episodes WHERE dataset = 'fr_user'"
            )
        ).scalar_one()
        assert "réserv" not in stored and "billet" not in stored


def test_changing_the_language_retokenises_the_index(engine) -> None:  # type: ignore[no-untyped-def]
    vault = keys.test_vault()
    with engine.begin() as conn:
        make_episode(conn, "switch", BOOKED)
    with engine.connect() as conn:
        before = lexical_coverage(conn, "switch", QUESTION)[" ".join(BOOKED)]
    assert before[0] < 1.0
    with engine.begin() as conn:
        assert set_language(conn, vault, "switch", "french")
        assert not set_language(conn, vault, "switch", "french")  # unchanged: no work
    with engine.connect() as conn:
        # The document and the chunks (passages) both answer in French now.
        assert lexical_coverage(conn, "switch", QUESTION)[" ".join(BOOKED)] == (1.0, 1.0)
        chunks = conn.execute(
            text("SELECT count(*) FROM message_chunks WHERE dataset = 'switch'")
        ).scalar_one()
        assert chunks >= 1


def test_the_language_is_set_through_set_dataset_policy(spawn) -> None:  # type: ignore[no-untyped-def]
    ingest = spawn("ingest")
    with ingest.channel() as channel:
        admin = admin_grpc.AdminServiceStub(channel)
        policy = admin.SetDatasetPolicy(
            admin_pb.SetDatasetPolicyRequest(dataset="lang_fr", language="fr", retention_days=30),
            timeout=30,
        ).policy
        assert policy.language == "french" and policy.retention_days == 30
        # Leaving the language unset keeps it.
        again = admin.SetDatasetPolicy(
            admin_pb.SetDatasetPolicyRequest(dataset="lang_fr", retention_days=60), timeout=30
        ).policy
        assert again.language == "french"
        read = admin.GetDatasetPolicy(
            admin_pb.GetDatasetPolicyRequest(dataset="lang_fr"), timeout=30
        ).policy
        assert read.language == "french"
        assert (
            admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="lang_ja", language="ja"), timeout=30
            ).policy.language
            == "simple"
        )
        with pytest.raises(grpc.RpcError) as caught:
            admin.SetDatasetPolicy(
                admin_pb.SetDatasetPolicyRequest(dataset="lang_x", language="fr; drop"),
                timeout=30,
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "language" in (caught.value.details() or "")
