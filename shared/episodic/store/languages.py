"""A dataset's language: which PostgreSQL text-search configuration parses and stems its
text for Recall's lexical index and its queries (``datasets.text_search_config``,
migration 0007).

A language is named by its ISO 639-1 code ("fr"), a BCP 47 tag ("fr-CA": the language
part counts) or PostgreSQL's own configuration name ("french"). A language PostgreSQL has
no stemmer for falls back to ``simple``: words as written, lowercased, no stop words — it
still matches word for word, in any script.

Changing a dataset's language re-tokenises what is already indexed (the episodes'
documents and the thread chunks' lexical vectors; the embeddings stay), in the caller's
transaction, so the index and the queries always use the same configuration.

A dataset nobody set a language for is **detected** from its text (migration 0015,
``datasets.language_origin``): the Summariser reads each new episode's messages
(:func:`detect_language`, Google's Compact Language Detector 2 from the ``pycld2`` wheel:
no download, ~0.1 µs a character) until it is sure, then sets the dataset's language once
(:func:`settle_detected_language`). Without it, a user writing French is stemmed as English
and judged by ``abstain``'s English curves. A language set through SetDatasetPolicy is never
overridden; setting it to ``auto`` hands it back to detection.
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Iterable
from importlib import resources
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from episodic.errors import InvalidArgument
from episodic.store.episodes import has_more_episodes_than
from episodic.store.events import event_document
from episodic.store.recall_index import (
    TEXT_SEARCH_CONFIG,
    IndexInput,
    blind_vectors,
    chunk_texts,
    dataset_config,
    hold_language,
    load_index_inputs,
    prepare_episode_documents,
)

if TYPE_CHECKING:
    from episodic.crypto import DatasetKey
    from episodic.store.vault import Vault

__all__ = [
    "AUTO",
    "DETECTED_ROLES",
    "FALLBACK_CONFIG",
    "ISO_639_1",
    "ISO_639_1_CODES",
    "ISO_639_2",
    "MAX_SWITCHED_EPISODES",
    "dataset_config",
    "dataset_sample",
    "detect_language",
    "hand_back_to_detection",
    "hold_language",
    "language_origin",
    "resolve_language",
    "set_language",
    "settle_detected_language",
    "three_letter_codes",
]

log = logging.getLogger(__name__)

#: The language SetDatasetPolicy takes to hand a dataset's language back to detection.
AUTO = "auto"

#: The configuration of a language PostgreSQL has no stemmer for.
FALLBACK_CONFIG = "simple"
#: ISO 639-1 codes of the languages PostgreSQL's built-in (Snowball) configurations stem.
ISO_639_1 = {
    "ar": "arabic",
    "ca": "catalan",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "eu": "basque",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nb": "norwegian",
    "ne": "nepali",
    "nl": "dutch",
    "nn": "norwegian",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
_LANGUAGE = re.compile(r"^[a-z]{2,8}(?:[-_][a-z0-9]{1,8})*$")


#: ISO 639-2 codes (bibliographic and terminological) of the languages PostgreSQL stems,
#: to their ISO 639-1 code: "fra" or "deu" is stemmed like "fr" or "de".
ISO_639_2 = {
    "ara": "ar",
    "cat": "ca",
    "dan": "da",
    "deu": "de",
    "ger": "de",
    "ell": "el",
    "gre": "el",
    "eng": "en",
    "spa": "es",
    "eus": "eu",
    "baq": "eu",
    "fin": "fi",
    "fra": "fr",
    "fre": "fr",
    "gle": "ga",
    "hin": "hi",
    "hun": "hu",
    "hye": "hy",
    "arm": "hy",
    "ind": "id",
    "ita": "it",
    "lit": "lt",
    "nob": "nb",
    "nep": "ne",
    "nld": "nl",
    "dut": "nl",
    "nno": "nn",
    "nor": "no",
    "por": "pt",
    "ron": "ro",
    "rum": "ro",
    "rus": "ru",
    "srp": "sr",
    "swe": "sv",
    "tam": "ta",
    "tur": "tr",
    "yid": "yi",
}
#: Every ISO 639-1 code: a language PostgreSQL has no stemmer for is still a language
#: (indexed with ``simple``); a word that is none of these, nor a configuration, is a typo.
_ISO_639_1_CODES = """
    aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu
    cv cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi
    ho hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks
    ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl
    nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl
    sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve
    vi vo wa wo xh yi yo za zh zu
"""
ISO_639_1_CODES = frozenset(_ISO_639_1_CODES.split())


@functools.cache
def three_letter_codes() -> frozenset[str]:
    """Every three-letter ISO 639 code (639-2, 639-3 and 639-5: the three-letter primary
    subtags BCP 47 allows), from :file:`episodic/data/iso_639_three_letter.txt`. About 8,000
    codes, read once: too many to list here, and without them a three-letter typo ("frn")
    would be taken for a language without a stemmer and the dataset re-stemmed word for
    word."""
    listed = resources.files("episodic").joinpath("data/iso_639_three_letter.txt")
    text_ = listed.read_text(encoding="utf-8")
    return frozenset(
        code for line in text_.splitlines() if not line.startswith("#") for code in line.split()
    )


def resolve_language(conn: Connection, language: str, *, strict: bool = True) -> str:
    """The text-search configuration for ``language`` on this server: its stemmer when
    PostgreSQL has one, else ``simple``. INVALID_ARGUMENT for what is not a language name
    and, when ``strict`` (a caller's choice; the detector's codes are not checked), for a
    name that is neither a configuration of this server nor a language code: "frnech"
    would otherwise re-stem the whole dataset word for word, silently."""
    value = language.strip().lower()
    if not _LANGUAGE.match(value):
        raise InvalidArgument(
            f"language {language[:40]!r} is not a language name: use an ISO 639-1 code "
            "('fr'), a BCP 47 tag ('pt-BR') or a PostgreSQL configuration ('french')",
            field="language",
        )
    primary = re.split(r"[-_]", value)[0]
    primary = ISO_639_2.get(primary, primary)
    # A configuration of this server by its own name first ("french_unaccent", which a
    # language tag's split would read as "french"), then the language the tag names.
    found = conn.execute(
        text(
            "SELECT cfgname FROM pg_ts_config WHERE cfgname = ANY(CAST(:n AS text[])) "
            "ORDER BY cfgname = :exact DESC LIMIT 1"
        ),
        {"n": [value, ISO_639_1.get(primary, primary)], "exact": value},
    ).scalar()
    if found:
        return str(found)
    # A BCP 47 language subtag of three letters is an ISO 639-2/3/5 code: those of stemmed
    # languages were mapped above; any other ("fil", a language with no two-letter code)
    # is accepted, indexed word for word.
    if (
        strict
        and primary not in ISO_639_1_CODES
        and (len(primary) != 3 or primary not in three_letter_codes())
    ):
        configs = conn.execute(
            text("SELECT cfgname FROM pg_ts_config WHERE cfgname <> 'simple' ORDER BY cfgname")
        ).scalars()
        raise InvalidArgument(
            f"language {language[:40]!r} is neither an ISO 639 code nor a text-search "
            f"configuration of this server ({', '.join(configs)}); a language without a "
            "stemmer is given by its code ('ja', 'fil') and indexed word for word ('simple')",
            field="language",
        )
    return FALLBACK_CONFIG


#: Detection decides only on at least this many letters: CLD2 is unreliable on a few words
#: (a "hi, thanks!" episode says nothing), and a wrong language, once detected, stays.
MIN_DETECT_LETTERS = 200
#: …and only when its language holds at least this share of the text (percent of bytes):
#: a conversation mixing two languages keeps the default.
MIN_DETECT_SHARE = 70
#: Detection reads at most this many characters (the first ones; CLD2 is linear in them).
MAX_DETECT_CHARS = 20_000
#: Whose messages say the dataset's language: its user's and the assistant's. System
#: prompts, tool calls and their output (JSON, SQL, logs) read as English to CLD2 whatever
#: the user writes.
DETECTED_ROLES = ("user", "assistant")
#: Detection switches a dataset to another language only while it has at most this many
#: completed episodes: switching re-stems its whole index in one transaction, which holds
#: the dataset's row (its completions and new threads wait). A larger dataset keeps its
#: configuration and the Summariser logs what it detected: SetDatasetPolicy is the
#: operator's way to re-stem it.
MAX_SWITCHED_EPISODES = 200


def detect_language(texts: Iterable[str], *, min_letters: int = MIN_DETECT_LETTERS) -> str | None:
    """The language ``texts`` are written in, as CLD2's code ("fr", "de", "zh-Hant"; English
    is "en"), or None when the text cannot tell: fewer than ``min_letters`` letters (a
    dataset's language: :data:`MIN_DETECT_LETTERS`), CLD2 not reliable, or no language
    holding :data:`MIN_DETECT_SHARE` % of it.

    Measured on the hand-written French, Spanish and German set and on LoCoMo's English
    (``python -m bench.quality.language_detection``): every one of 425 sessions right; single
    messages 97.8 % (other languages) and 99.4 % (English), most misses a few words.

    Without the ``pycld2`` wheel (built for x86-64 Linux only) nothing is detected."""
    sample = "\n".join(texts)[:MAX_DETECT_CHARS]
    if sum(ch.isalpha() for ch in sample) < min_letters:
        return None
    pycld2 = _detector()
    if pycld2 is None:
        return None
    try:
        reliable, _, found = pycld2.detect(sample, isPlainText=True)
    except pycld2.error:
        # CLD2 refuses some code points (C1 controls, noncharacters) as "invalid UTF-8":
        # the words around them still say the language.
        printable = "".join(ch if ch.isprintable() else " " for ch in sample)
        try:
            reliable, _, found = pycld2.detect(printable, isPlainText=True)
        except pycld2.error:
            return None
    _, code, share, _ = found[0]
    if not reliable or code in ("un", "xxx") or share < MIN_DETECT_SHARE:
        return None
    return str(code)


@functools.cache
def _detector():  # type: ignore[no-untyped-def]
    """The ``pycld2`` module, or None (logged once: the answer is cached) where it is not
    installed: its wheels are built for x86-64 Linux, and elsewhere pip needs a C++
    toolchain to build it — a service must start either way, with detection off."""
    try:
        import pycld2
    except ImportError:
        log.warning(
            "language detection is off: the pycld2 package is not installed (wheels "
            "for x86-64 Linux); set each dataset's language with SetDatasetPolicy"
        )
        return None
    return pycld2


def language_origin(conn: Connection, dataset: str) -> str | None:
    """Whose choice the dataset's configuration is: 'default' (nobody's: detection may set
    it), 'detected' or 'set' (migration 0015); None for a dataset not registered yet."""
    value = conn.execute(
        text("SELECT language_origin FROM datasets WHERE dataset = :d"), {"d": dataset}
    ).scalar()
    return str(value) if value else None


_TOO_LARGE_LOGGED: set[str] = set()  # datasets whose detection was logged, not applied


def settle_detected_language(
    conn: Connection, vault: Vault, dataset: str, texts: Iterable[str]
) -> str | None:
    """Detects the language of ``texts`` (a new episode's thread, its user's and
    assistant's messages; with some of the dataset's other messages when the thread alone is
    too short to tell: :func:`dataset_sample`) for a dataset whose language nobody chose,
    and when it can tell,
    makes it the dataset's language for good: its configuration (re-tokenising what is
    indexed when it changes) and origin 'detected'. Returns the configuration it set, None
    when it did nothing: the dataset's language was chosen already, the text cannot tell
    (the next episode asks again), or it would switch a dataset larger than
    :data:`MAX_SWITCHED_EPISODES` (logged once per process; it stays as it is).

    One cheap read when the language is settled (every episode after the first pays only
    that); the dataset's row is locked only to write, and the origin read again under the
    lock, so two workers detecting at once settle it once."""
    if language_origin(conn, dataset) != "default":
        return None
    texts = list(texts)
    if sum(ch.isalpha() for t in texts for ch in t) < MIN_DETECT_LETTERS:
        # One short thread cannot tell, but the dataset's threads together may (the thread's
        # own messages among them): a user of short conversations would otherwise stay
        # undetected for good (issue 40).
        texts = dataset_sample(conn, vault, dataset) or texts
    code = detect_language(texts)
    if code is None:
        return None
    config = resolve_language(conn, code, strict=False)
    if config != dataset_config(conn, dataset) and has_more_episodes_than(
        conn, dataset, MAX_SWITCHED_EPISODES
    ):
        if dataset not in _TOO_LARGE_LOGGED:
            _TOO_LARGE_LOGGED.add(dataset)
            log.warning(
                "dataset %s reads as %s (%s), but it has more than %d episodes to re-stem: "
                "it keeps its configuration; SetDatasetPolicy(language=%r) switches it",
                dataset,
                code,
                config,
                MAX_SWITCHED_EPISODES,
                code,
            )
        return None
    hold_language(conn, dataset, exclusive=True)  # as set_language takes it, first
    if language_origin(conn, dataset) != "default":
        return None
    set_language(conn, vault, dataset, config, origin="detected")
    log.info("dataset %s: language detected from its text: %s (%s)", dataset, code, config)
    return config


def set_language(
    conn: Connection, vault: Vault, dataset: str, config: str, *, origin: str = "set"
) -> bool:
    """Sets the dataset's configuration (the row must exist: Vault.for_write registers it)
    and whose choice it is (``origin``: 'set' by a caller, 'detected', or 'default' when
    handed back to detection) and, when the configuration changed, re-tokenises its lexical
    index; returns whether it changed.

    Locks: the dataset's language lock exclusively first (:func:`hold_language`): whatever
    stems text for the dataset waits (the Summariser's completions and chunk index,
    compaction, RecordEvent), and two switches run one after the other. The re-stem then
    runs in the new configuration *before* the dataset's row is updated, and the row is
    locked only by that last update: a re-stem of ~7 ms an episode takes minutes on a large
    dataset, and the row's lock would hold up its CreateThread and everything else that
    share-locks the row (Vault.for_write) all that time. Until the switch commits,
    Recall reads the old configuration and the old stems together. A caller that holds
    the row locked before this call holds it for the whole switch."""
    hold_language(conn, dataset, exclusive=True)
    previous = conn.execute(
        text("SELECT text_search_config FROM datasets WHERE dataset = :d"), {"d": dataset}
    ).scalar_one()
    if previous != config:
        _retokenise(conn, vault, dataset, config)
    conn.execute(
        text(
            "UPDATE datasets SET text_search_config = :c, language_origin = :o, "
            "updated_at = now() WHERE dataset = :d"
        ),
        {"c": config, "o": origin, "d": dataset},
    )
    return bool(previous != config)


#: How many of a dataset's messages :func:`dataset_sample` reads at most.
SAMPLE_MESSAGES = 100


def dataset_sample(
    conn: Connection, vault: Vault, dataset: str, *, fresh: bool = False
) -> list[str]:
    """Some of the dataset's user's and assistant's messages, opened, up to what detection
    reads (:data:`MAX_DETECT_CHARS`): any of them will do to tell a language, from as many
    threads as hold them. At most :data:`SAMPLE_MESSAGES` rows read. ``fresh``: the
    dataset's key read again rather than from the vault's cache."""
    key = vault.for_read(conn, dataset, fresh=fresh)
    sealed = conn.execute(
        text("SELECT content FROM messages WHERE dataset = :d AND role = ANY(:roles) LIMIT :n"),
        {"d": dataset, "roles": list(DETECTED_ROLES), "n": SAMPLE_MESSAGES},
    ).scalars()
    texts, chars = [], 0
    for value in sealed:  # opened until there is as much as detection reads
        texts.append(key.open(bytes(value), "messages.content"))
        chars += len(texts[-1])
        if chars >= MAX_DETECT_CHARS:
            break
    return texts


def hand_back_to_detection(conn: Connection, vault: Vault, dataset: str) -> str | None:
    """SetDatasetPolicy's ``language: "auto"``: the dataset's language is nobody's choice
    again, detected at once from some of its user's and assistant's messages when they can
    tell (then it is settled, whatever the dataset's size: the caller asked), else
    'english' until an episode can (when the Summariser detects:
    EPISODIC_DETECT_LANGUAGE). Returns the configuration detected, None when the messages
    could not tell."""
    code = detect_language(dataset_sample(conn, vault, dataset, fresh=True))
    if code is None:
        set_language(conn, vault, dataset, TEXT_SEARCH_CONFIG, origin="default")
        return None
    config = resolve_language(conn, code, strict=False)
    set_language(conn, vault, dataset, config, origin="detected")
    return config


#: How many episodes (or events) :func:`_retokenise` reads, stems and writes per round:
#: a few statements per batch instead of a dozen per episode.
RETOKENISE_BATCH = 100


def _retokenise(conn: Connection, vault: Vault, dataset: str, config: str) -> None:
    """Re-stems everything of ``dataset`` the lexical index holds in ``config`` (the one
    it is switching to): its current episodes' documents, their threads' chunks, and its
    events."""
    key = vault.for_read(conn, dataset)
    episode_ids = list(
        conn.execute(
            text(
                "SELECT episode_id FROM episodes WHERE dataset = :d AND status = 'completed' "
                "AND search_vector IS NOT NULL ORDER BY episode_id"
            ),
            {"d": dataset},
        ).scalars()
    )
    for start in range(0, len(episode_ids), RETOKENISE_BATCH):
        # erased or purged since the list was read: left out, nothing to re-stem
        sources = load_index_inputs(
            conn, vault, dataset, episode_ids[start : start + RETOKENISE_BATCH]
        )
        _restem_episodes(conn, key, sources, config)
    _restem_events(conn, vault, key, dataset, config)


def _restem_episodes(
    conn: Connection, key: DatasetKey, sources: list[IndexInput], config: str
) -> None:
    if not sources:
        return
    # the documents as the index writes them (with their speakers' words, re-stemmed)
    documents = prepare_episode_documents(conn, key, sources, config=config)
    conn.execute(
        text(
            "UPDATE episodes e SET search_vector = CAST(u.v AS tsvector), search_length = u.n "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:vs AS text[]), CAST(:ns AS integer[])) "
            "AS u(id, v, n) WHERE e.dataset = :d AND e.episode_id = u.id"
        ),
        {
            "d": key.dataset,
            "ids": [s.episode_id for s in sources],
            "vs": [d[0] for d in documents],
            "ns": [d[1] for d in documents],
        },
    )
    ends: dict[uuid.UUID, dict[tuple[int, int], int]] = {}
    for thread_id, sequence, offset, end in conn.execute(
        text(
            "SELECT thread_id, start_sequence, start_offset, end_sequence FROM message_chunks "
            "WHERE dataset = :d AND thread_id = ANY(CAST(:t AS uuid[]))"
        ),
        {"d": key.dataset, "t": [s.thread_id for s in sources]},
    ):
        ends.setdefault(thread_id, {})[(int(sequence), int(offset))] = int(end)
    chunks: list[tuple[uuid.UUID, int, int, str]] = []
    for source in sources:
        cut = ends.get(source.thread_id, {})
        texts = chunk_texts(source.messages, list(cut), cut)
        chunks.extend((source.thread_id, s, o, texts[(s, o)]) for s, o in sorted(texts))
    if not chunks:
        return
    vectors = blind_vectors(conn, key, [(c[3], "") for c in chunks], config=config)
    conn.execute(
        text(
            "UPDATE message_chunks c SET search_vector = CAST(u.v AS tsvector), "
            "search_length = u.n FROM unnest(CAST(:ts AS uuid[]), CAST(:ss AS bigint[]), "
            "CAST(:os AS integer[]), CAST(:vs AS text[]), CAST(:ns AS integer[])) "
            "AS u(t, s, o, v, n) WHERE c.dataset = :d AND c.thread_id = u.t "
            "AND c.start_sequence = u.s AND c.start_offset = u.o"
        ),
        {
            "d": key.dataset,
            "ts": [c[0] for c in chunks],
            "ss": [c[1] for c in chunks],
            "os": [c[2] for c in chunks],
            "vs": [v[0] for v in vectors],
            "ns": [v[1] for v in vectors],
        },
    )


def _restem_events(
    conn: Connection, vault: Vault, key: DatasetKey, dataset: str, config: str
) -> None:
    """Events are stemmed when recorded (``store.events.record_event``): re-stemmed with
    the rest, or a query in the new configuration would miss their words."""
    after = None
    while True:
        rows = list(
            conn.execute(
                text(
                    "SELECT event_id, dataset, summary, actor, entities, event_type FROM events "
                    "WHERE dataset = :d AND (CAST(:after AS uuid) IS NULL "
                    "OR event_id > CAST(:after AS uuid)) ORDER BY event_id LIMIT :n"
                ),
                {"d": dataset, "after": after, "n": RETOKENISE_BATCH},
            ).mappings()
        )
        if not rows:
            return
        opened = vault.open_rows(conn, dataset, rows, "events")
        vectors = blind_vectors(conn, key, [(event_document(r), "") for r in opened], config=config)
        conn.execute(
            text(
                "UPDATE events ev SET search_vector = CAST(u.v AS tsvector), search_length = u.n "
                "FROM unnest(CAST(:ids AS uuid[]), CAST(:vs AS text[]), CAST(:ns AS integer[])) "
                "AS u(id, v, n) WHERE ev.dataset = :d AND ev.event_id = u.id"
            ),
            {
                "d": dataset,
                "ids": [r["event_id"] for r in rows],
                "vs": [v[0] for v in vectors],
                "ns": [v[1] for v in vectors],
            },
        )
        after = rows[-1]["event_id"]
