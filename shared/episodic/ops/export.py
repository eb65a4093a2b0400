"""Export a dataset as JSON lines, optionally pseudonymised — ``episodic export``.

The export goes through the SDK (:class:`episodic.sdk.client.EpisodicClient`: ListThreads,
ListMessages, ListEpisodes, all paged), so it needs only the core install and whatever
credentials the other client commands use. It streams: a page of records is written as
soon as it arrives, and nothing but thread ids (to export each thread once) and, when
pseudonymising, the known names is kept in memory.

Format (version :data:`FORMAT_VERSION`): one JSON object per line, each with a ``type``::

    {"type": "dataset", "format": "episodic-export", "version": 1, "dataset": "user_42",
     "exported_at": "…", "pseudonymised": false}
    {"type": "thread", "thread_id", "dataset", "label", "metadata", "message_count",
     "captured_sequence", "created_at", "last_message_at", "ended_at", "compaction"}
    {"type": "message", "thread_id", "sequence", "role", "content", "metadata",
     "created_at", "received_at", "idempotency_key"}            (in sequence order)
    {"type": "episode", "episode_id", "thread_id", "dataset", "status", "semantic_status",
     "summary", "key_learnings", "entities", "event_type", "actor", "message_count",
     "start_sequence", "end_sequence", "started_at", "ended_at", "trigger",
     "retry_count", "error", "created_at", "updated_at", "thread_label"}
                                                   (every status, by window)
    {"type": "episode", …, "kind": "event", "event_source": "agent"}
                 (events: a thread's with its episodes, those without a thread at the end)
    {"type": "end", "counts": {"thread": 3, "message": 41, "episode": 5}, "finished_at": "…"}

A thread's line is followed by its messages and then its episodes, so a reader can handle
one thread at a time. Times are ISO 8601 with an offset; absent times are ``null``. The
``end`` line is written only when the export completed: a file without it is partial.
Readers must ignore fields they do not know. ``compaction`` is null, or for a compacted
thread ``{"compacted_at", "through_sequence", "content_digest", "episode_id", "summary"}``:
its messages up to ``through_sequence`` are gone (not in the file) and the summary stands
in for them.

A dataset written to during the export: every thread is exported once, as it was when its
turn came (threads that became active after the export started are picked up at the end).

Pseudonymisation (:class:`Pseudonymiser`, seed 003: "mask or pseudonymise before any
analytics") replaces, with keyed pseudonyms (HMAC-SHA-256; the same input and key give the
same pseudonym in every run, another key gives others, and without the key they cannot be
reversed or guessed by hashing candidate names):

- the dataset name (``dataset_<hex>``), thread and episode ids (UUIDs derived from the id;
  a compaction's ``episode_id`` too), idempotency keys (``key_<hex>``), and a compaction's
  ``content_digest`` (keyed: equal digests stay equal under one key);
- the values of identifier keys in thread and message metadata, at any depth
  (:data:`IDENTIFIER_KEYS`: user_id, userid, user, username, user_name, name, speaker,
  email, author, sender; ``user_<hex>``), and each word of a person's name (name,
  speaker, author, sender: "Alice" of "Alice Walker", "O'Brien" of "Miles O'Brien",
  "Jean-Luc", "Jean" and "Luc" of "Jean-Luc Picard", "Li" of "Wu Li" — which also masks
  that word where it is not a name, "Will" of "Will Smith" in "I will"). Not on their
  own: titles, particles and common words (:data:`NOT_NAME_PARTS`: "He" of "He Wei"),
  initials, and the words of a value of more than 4 words that does not look like a name
  (every word capitalised or a particle);
- the entities of episodes (and the name in ``project atlas``-style entities) and actors
  that are names (``entity_<hex>``);
- and each of these, plus any UUID or e-mail address, wherever it occurs in message
  content, labels, summaries (a compacted thread's too), key learnings, metadata strings
  and errors: whole words (an underscore separates words: "carol" of ``carol_danvers``;
  a letter or digit does not: ``carol99`` stays), case-insensitively, longest first.
  Every string field a record has is masked as text unless it is an id, a name or one of
  :data:`PLAIN_FIELDS` (the format's words and times).

The first pass learns the names of every record, the events without a thread included,
before the second writes any. It catches the names it knows, not every identifier in free
text: a person, place or number that is neither in metadata nor an extracted entity
stays as written, and so does a handle not spelt from a known name (``cdanvers``,
``caroldanvers``). Review a sample before sharing an export.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import time
import unicodedata
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any, Protocol

from episodic.sdk.client import Episode, Message, Page, Thread

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "IDENTIFIER_KEYS",
    "NAME_PARTICLES",
    "NOT_NAME_PARTS",
    "PERSON_KEYS",
    "PLAIN_FIELDS",
    "ExportCounts",
    "ExportSource",
    "Progress",
    "Pseudonymiser",
    "default_key_file",
    "dumps",
    "episode_record",
    "export_dataset",
    "load_or_create_key",
    "message_record",
    "thread_record",
]

FORMAT = "episodic-export"
FORMAT_VERSION = 1
#: Metadata keys (compared case-insensitively, at any depth) whose values identify a person.
IDENTIFIER_KEYS: frozenset[str] = frozenset(
    {"user_id", "userid", "user", "username", "user_name", "name", "speaker", "email", "author",
     "sender"}
)  # fmt: skip
#: Identifier keys whose values are people's names: each word of the name is also masked
#: on its own ("Alice" of "Alice Walker", "Jean" and "Luc" of "Jean-Luc Picard"; see
#: :meth:`Pseudonymiser.learn_person`).
PERSON_KEYS: frozenset[str] = frozenset({"name", "speaker", "author", "sender"})
#: Particles of names ("de la Cruz", "van Dijk"): parts of a name, not names.
NAME_PARTICLES: frozenset[str] = frozenset(
    {"de", "del", "della", "der", "den", "di", "da", "das", "dos", "du", "la", "le", "van",
     "von", "ten", "ter", "bin", "ibn", "binti", "el", "y"}
)  # fmt: skip
#: Words of a person's name that are not learned on their own (the whole name still is):
#: particles, titles and common words, which a "name" that is a phrase ("Sales and
#: Support") or a two-letter part that is also a word ("He" of "He Wei", "Do" of "Do Van
#: Minh") would otherwise mask all through the text. The price: such a part, written
#: alone, stays as written.
NOT_NAME_PARTS: frozenset[str] = NAME_PARTICLES | frozenset(
    {
        # titles and suffixes
        "mr", "mrs", "ms", "miss", "mx", "dr", "prof", "sir", "dame", "lord", "lady", "rev",
        "jr", "sr", "ii", "iii", "iv", "phd", "md", "esq", "st",
        # common words (every common two-letter one)
        "a", "ah", "ai", "am", "an", "as", "at", "be", "by", "do", "eh", "go", "he", "hi",
        "id", "if", "in", "is", "it", "me", "my", "no", "of", "oh", "ok", "on", "or", "pm",
        "re", "so", "to", "uh", "um", "up", "us", "vs", "we", "ya", "yo", "and", "the", "for",
        "with", "from", "into", "our", "your", "you", "not", "but", "are", "was", "has",
        "have", "this", "that", "all", "any", "new", "one", "two", "team", "group", "bot",
    }
)  # fmt: skip
#: A person's name of more than this many words is split into parts only when it looks
#: like one (every word capitalised or a particle, none a common word): a longer value
#: under ``name`` is more often a title or a sentence, whose words must not be masked
#: all through the text. (A long name in a script without capitals is masked whole only.)
PLAIN_NAME_WORDS = 4
#: Record fields (at any depth) whose string values are the format's own vocabulary,
#: times, or the key's fingerprint: exported as they are by a pseudonymised export. Every
#: other string is masked (:meth:`Pseudonymiser.record`).
PLAIN_FIELDS: frozenset[str] = frozenset(
    {"type", "format", "role", "status", "semantic_status", "trigger", "kind", "event_source",
     "pseudonym_key_id", "identifier_keys", "exported_at", "finished_at", "created_at",
     "received_at", "last_message_at", "ended_at", "started_at", "updated_at",
     "compacted_at"}
)  # fmt: skip
#: Words that name a role, never a person: not learned as names (masking every "user" in
#: the text would destroy it without protecting anyone).
ROLE_WORDS: frozenset[str] = frozenset({"user", "assistant", "system", "tool", "agent", ""})
PAGE_SIZE = 1000
#: Threads fetched ahead of the one being written (calls in flight at once).
PREFETCH = 4
#: A thread active this long before the export started may have moved in the listing
#: (clock skew between this machine and the database included).
ACTIVITY_MARGIN = timedelta(minutes=5)
MIN_KEY_BYTES = 16


# --------------------------------------------------------------------------- records


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _record(kind: str, value: Any) -> dict[str, Any]:
    return {"type": kind} | {
        f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
    }


def thread_record(thread: Thread) -> dict[str, Any]:
    """The ``thread`` line of an SDK thread."""
    return _record("thread", thread)


def message_record(message: Message) -> dict[str, Any]:
    """The ``message`` line of an SDK message."""
    return _record("message", message)


def episode_record(episode: Episode) -> dict[str, Any]:
    """The ``episode`` line of an SDK episode."""
    return _record("episode", episode)


# Line separators other than \n that some readers split on (str.splitlines does); JSON
# leaves them unescaped, so they are escaped here: one record is always one line.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def dumps(record: Mapping[str, Any]) -> str:
    """One record as one line of JSON (without the newline)."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_LINE_BREAKS)


# --------------------------------------------------------------------------- keys


def default_key_file() -> Path:
    """``$XDG_CONFIG_HOME/episodic/pseudonym.key`` (``~/.config/…`` by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "episodic" / "pseudonym.key"


def load_or_create_key(path: Path) -> tuple[bytes, bool]:
    """The pseudonymisation key in ``path`` (hex, or at least 16 raw bytes), created with
    32 random bytes (hex, mode 0600) when the file does not exist. Returns the key and
    whether it was created."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = secrets.token_bytes(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # created meanwhile by another export: use that one
            return load_or_create_key(path)
        with os.fdopen(fd, "w") as out:
            out.write(key.hex() + "\n")
        return key, True
    text = raw.strip()
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = text
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(
            f"{path} holds a {len(key)}-byte key; a pseudonym key needs at least "
            f"{MIN_KEY_BYTES} bytes (delete the file to have a random one created)"
        )
    return key, False


# --------------------------------------------------------------------------- pseudonyms

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_BASE = re.compile(rf"(?<![\w-])(?P<uuid>{_UUID})(?![\w-])|(?P<email>{_EMAIL})")
MAX_TERM_CHARS = 200


def _canon(value: str) -> str:
    """How a name is compared: composed (NFC), lower case, one space between words, plain
    apostrophes."""
    value = unicodedata.normalize("NFC", value)
    return " ".join(value.translate(_APOSTROPHES).lower().split())


#: One word of a person's name: letters, joined by apostrophes or hyphens (O'Brien,
#: Jean-Luc), with the punctuation around it ("Walker,", "(Bob)", "Dr.") left out.
_NAME_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")
#: Letters or digits: what may not touch a name in text for it to match. An underscore
#: may (``carol_danvers`` holds "carol" and "danvers"), unlike ``\b``.
_NOT_BEFORE = r"(?<![^\W_])"
_NOT_AFTER = r"(?![^\W_])"


def _worth_masking(term: str) -> bool:
    """Single characters and short numbers would mask half the text and protect nobody."""
    if len(term) < 2 or len(term) > MAX_TERM_CHARS or term in ROLE_WORDS:
        return False
    return any(c.isalpha() for c in term) or len(term) >= 4


def _name_words(name: str) -> tuple[list[str], int]:
    """The words of a person's name that are letters, joined by apostrophes or hyphens,
    without the punctuation around them ("Walker,", "(Bob)", "Dr."); and how many words
    the value has in all (with "007" of "Agent 007")."""
    value = unicodedata.normalize("NFC", name).translate(_APOSTROPHES)
    tokens = [t for t in (raw.strip(".,;:!?()[]{}<>\"'") for raw in value.split()) if t]
    return [t for t in tokens if _NAME_WORD.fullmatch(t)], len(tokens)


def _looks_like_a_name(words: list[str]) -> bool:
    """Whether a long value is a person's name ("Pablo Diego José Ruiz Picasso", "María
    de la Paz Gómez Ortiz"), not a phrase ("Weekly Review of the Atlas Budget"): every
    word a capitalised name or a particle, none a common word."""
    for word in words:
        term = _canon(word)
        if term in NAME_PARTICLES:
            continue
        if term in NOT_NAME_PARTS or not word[:1].isupper():
            return False
    return True


def _pattern_char(ch: str) -> str:
    if ch == " ":
        return r"\s+"
    if ch == "'":
        return "['\u2019\u2018\u02bc]"
    decomposed = unicodedata.normalize("NFD", ch)
    if decomposed != ch:  # "ë" is also written "e" + U+0308 (macOS file names, some IMEs)
        return f"(?:{re.escape(ch)}|{re.escape(decomposed)})"
    return re.escape(ch)


def _trie_pattern(terms: Iterable[str]) -> str:
    """A regular expression matching any of ``terms`` (canonical), built as a trie: one
    step per character instead of one try per term, and the longest term first at each
    position (a term's end is an optional tail, tried after its continuations)."""
    root: dict[str, Any] = {}
    for term in terms:
        node = root
        for ch in term:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [_pattern_char(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(root)


class Pseudonymiser:
    """Keyed, stable pseudonyms for a dataset's identifiers (see the module docstring).

    Learn the names first (:meth:`learn_record` on every record, or the ``learn_*``
    methods), then transform records (:meth:`record`); a name learned later is masked from
    then on. Pseudonyms depend only on the key and the name, so two exports with the same
    key can be joined, and the prefix (``user_``, ``entity_``) says what a name was.
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a pseudonym key needs at least {MIN_KEY_BYTES} bytes")
        self._key = key
        self._kinds: dict[str, str] = {}  # canonical name -> "user" | "entity"
        self._matcher: re.Pattern[str] | None = _BASE

    @property
    def key_id(self) -> str:
        """A fingerprint of the key (not the key): exports with equal ids can be joined."""
        return self._digest("key-id", "")[:16]

    def _digest(self, domain: str, value: str) -> str:
        message = f"{domain}\x00{value}".encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    # -- learning

    def learn_name(self, value: Any, kind: str) -> None:
        """Remembers ``value`` as a name of ``kind`` ("user" wins over "entity")."""
        if not isinstance(value, str | int) or isinstance(value, bool):
            return
        term = _canon(str(value))
        if not _worth_masking(term):
            return
        known = self._kinds.get(term)
        if known is None or (known != "user" and kind == "user"):
            self._kinds[term] = kind
            self._matcher = None

    def learn_person(self, name: str) -> None:
        """Each word of a person's name, since people are called by one of them: "Alice"
        of "Alice Walker", "O'Brien" of "Miles O'Brien", "Jean-Luc", "Jean" and "Luc" of
        "Jean-Luc Picard", "Li" of "Wu Li" (two letters are enough). Not learned on their
        own: :data:`NOT_NAME_PARTS`, single letters (initials), words with digits, and the
        words of a value of more than :data:`PLAIN_NAME_WORDS` words that does not look
        like a name (see there). The whole name is learned by :meth:`learn_name`."""
        words, count = _name_words(name)
        if count > PLAIN_NAME_WORDS and (len(words) < count or not _looks_like_a_name(words)):
            return
        for word in words:
            parts = [word, *word.split("-")] if "-" in word else [word]
            for part in parts:
                if len(part) >= 2 and _canon(part) not in NOT_NAME_PARTS:
                    self.learn_name(part, "user")

    def learn_entity(self, entity: str) -> None:
        """An episode's entity, and the name in ``project atlas`` / ``invoice:#42``."""
        self.learn_name(entity, "entity")
        term = _canon(entity)
        if ":" in term:
            self.learn_name(term.split(":", 1)[1].lstrip("#@"), "entity")
        words = term.split(" ")
        if len(words) >= 2 and words[0] in ("project", "ticket", "invoice", "issue"):
            self.learn_name(" ".join(words[1:]), "entity")
        if term[:1] in "@#":
            self.learn_name(term[1:], "entity")

    def learn_metadata(self, metadata: Any) -> None:
        """The values of :data:`IDENTIFIER_KEYS`, at any depth; the words of a person's
        name (:data:`PERSON_KEYS`) too, since people are called by their first name."""
        if isinstance(metadata, dict):
            for key, value in metadata.items():
                if isinstance(key, str) and key.lower() in IDENTIFIER_KEYS:
                    for item in value if isinstance(value, list) else [value]:
                        self.learn_name(item, "user")
                        if key.lower() in PERSON_KEYS and isinstance(item, str):
                            self.learn_person(item)
                else:
                    self.learn_metadata(value)
        elif isinstance(metadata, list):
            for item in metadata:
                self.learn_metadata(item)

    def learn_dataset(self, dataset: str) -> None:
        """A dataset name often is a user id (``user_42``, ``acme/user_42``)."""
        self.learn_name(dataset, "user")
        self.learn_name(dataset.rsplit("/", 1)[-1], "user")

    def learn_record(self, record: Mapping[str, Any]) -> None:
        """Learns the names one export record carries."""
        kind = record.get("type")
        if kind in ("thread", "message"):
            self.learn_metadata(record.get("metadata"))
        elif kind == "episode":
            for entity in record.get("entities") or []:
                self.learn_entity(entity)
            actor = record.get("actor")
            if isinstance(actor, str) and _canon(actor) not in ROLE_WORDS:
                self.learn_name(actor, "entity")

    # -- pseudonyms

    def name(self, value: str, kind: str = "user") -> str:
        """The pseudonym of a name (its learned kind wins over ``kind``)."""
        term = _canon(value)
        return f"{self._kinds.get(term, kind)}_{self._digest('name', term)[:12]}"

    def dataset(self, dataset: str) -> str:
        """A valid dataset name: ``dataset_<hex>``."""
        return f"dataset_{self._digest('dataset', dataset)[:12]}"

    def identifier(self, value: str) -> str:
        """A UUID stays a UUID (so the export stays importable); other ids become
        ``id_<hex>``."""
        try:
            canonical = str(uuid.UUID(value))
        except (ValueError, AttributeError, TypeError):
            return f"id_{self._digest('id', value)[:12]}"
        return str(uuid.UUID(bytes=bytes.fromhex(self._digest("id", canonical)[:32]), version=4))

    def token(self, prefix: str, value: str) -> str:
        return f"{prefix}_{self._digest(prefix, value)[:12]}"

    # -- transforming

    def _compiled(self) -> re.Pattern[str]:
        if self._matcher is None:
            terms = sorted(self._kinds, key=lambda t: (-len(t), t))
            trie = _trie_pattern(terms)
            term = rf"|{_NOT_BEFORE}(?P<term>{trie}){_NOT_AFTER}"
            pattern = _BASE.pattern + (term if trie else "")
            self._matcher = re.compile(pattern, re.IGNORECASE)
        return self._matcher

    def _replace(self, match: re.Match[str]) -> str:
        if match.group("uuid"):
            return self.identifier(match.group("uuid"))
        text = match.group(0)
        if match.group("email") and _canon(text) not in self._kinds:
            return self.token("email", _canon(text))
        return self.name(text)

    def text(self, value: str) -> str:
        """``value`` with every known name, UUID and e-mail address replaced."""
        if not value:
            return value
        return self._compiled().sub(self._replace, value)

    def metadata(self, value: Any) -> Any:
        """Identifier keys' values become pseudonyms; other strings are masked as text."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if isinstance(key, str) and key.lower() in IDENTIFIER_KEYS:
                    out[key] = self._identifier_value(item)
                else:
                    out[self.text(key) if isinstance(key, str) else key] = self.metadata(item)
            return out
        if isinstance(value, list):
            return [self.metadata(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def _identifier_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self._identifier_value(v) for v in value]
        if isinstance(value, dict):
            return self.metadata(value)
        if value is None or isinstance(value, bool):
            return value
        return self.name(str(value))

    def record(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """A pseudonymised copy of one export record: the fields that hold ids and names
        get their pseudonyms, :data:`PLAIN_FIELDS` stay as they are, and every other
        string, at any depth, is masked as text (:meth:`text`): a field this method does
        not know (a thread's nested ``compaction``, a field a later version adds) is
        masked, never copied in clear."""
        return {key: self._field(key, value) for key, value in record.items()}

    def _field(self, key: str, value: Any) -> Any:
        if value is None or isinstance(value, bool | int | float) or key in PLAIN_FIELDS:
            return value
        if key == "metadata":
            return self.metadata(value)
        if isinstance(value, dict):  # e.g. compaction: {"episode_id", "summary", …}
            return {k: self._field(k, v) if isinstance(k, str) else v for k, v in value.items()}
        if isinstance(value, list):
            return [self._field(key, item) for item in value]
        if not isinstance(value, str):
            return value
        if key == "dataset":
            return self.dataset(value)
        if key in ("thread_id", "episode_id"):
            return self.identifier(value) if value else value
        if key == "idempotency_key":
            return self.token("key", value) if value else value
        if key == "content_digest":
            # The SHA-256 of a compacted thread's dropped messages: in clear it would link
            # the file back to the live thread (GetThread shows it) and confirm a guess of
            # what was dropped. Keyed, it still matches across exports with the same key.
            return self._digest("digest", value) if value else value
        if key == "entities":
            return self.name(value, "entity")
        if key == "actor" and _canon(value) in self._kinds:
            return self.name(value)
        return self.text(value)


# --------------------------------------------------------------------------- progress


class Progress:
    """A one-line counter on ``stream`` (stderr), redrawn at most every ``interval`` s:
    records written, per type, the rate, and the share done when the totals are known.
    Draws nothing when disabled."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        enabled: bool | None = None,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval = interval
        self.clock = clock
        self.started = clock()
        self.phase = "exporting"
        self.counts: dict[str, int] = {}
        self.total_messages: int | None = None
        self._drawn_at = float("-inf")
        self._width = 0

    def count(self, kind: str, n: int = 1) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + n
        if self.enabled and self.clock() - self._drawn_at >= self.interval:
            self.draw()

    def render(self) -> str:
        elapsed = max(self.clock() - self.started, 1e-9)
        lines = sum(self.counts.values())
        parts = [f"{k}s {self.counts.get(k, 0):,}" for k in ("thread", "message", "episode")]
        done = ""
        if self.total_messages:
            share = min(1.0, self.counts.get("message", 0) / self.total_messages)
            done = f" {share:4.0%} of ~{self.total_messages:,} messages,"
        return f"{self.phase}: {', '.join(parts)},{done} {lines / elapsed:,.0f} lines/s"

    def draw(self) -> None:
        self._drawn_at = self.clock()
        line = self.render()
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def restart(self, phase: str) -> None:
        """Starts counting again for another pass (the names pass, then the export)."""
        if self.enabled and self.counts:
            self.draw()
            self.stream.write("\n")
        self.phase = phase
        self.counts = {}
        self.started = self.clock()
        self._width = 0

    def close(self) -> None:
        if self.enabled:
            self.draw()
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------- export


class ExportSource(Protocol):
    """What the export needs of :class:`episodic.sdk.client.EpisodicClient`."""

    def list_threads(
        self, dataset: str, *, page_size: int = ..., page_token: str = ...
    ) -> Page[Thread]: ...

    def list_messages(
        self, thread_id: str, *, page_size: int = ..., page_token: str = ...
    ) -> Page[Message]: ...

    def list_episodes(
        self,
        dataset: str,
        *,
        thread_id: str | None = ...,
        page_size: int = ...,
        page_token: str = ...,
    ) -> Page[Episode]: ...


@dataclass
class ExportCounts:
    """Records written, per type."""

    thread: int = 0
    message: int = 0
    episode: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"thread": self.thread, "message": self.message, "episode": self.episode}


def _threads(source: ExportSource, dataset: str) -> Iterator[Thread]:
    token = ""
    while True:
        page = source.list_threads(dataset, page_size=PAGE_SIZE, page_token=token)
        yield from page.items
        token = page.next_page_token
        if not token:
            return


def _episodes(source: ExportSource, dataset: str, thread_id: str) -> list[Episode]:
    """A thread's episodes of every status, by window (few per thread)."""
    out: list[Episode] = []
    token = ""
    while True:
        page = source.list_episodes(
            dataset, thread_id=thread_id, page_size=PAGE_SIZE, page_token=token
        )
        out.extend(page.items)
        token = page.next_page_token
        if not token:
            break
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(out, key=lambda e: (e.start_sequence, e.created_at or far, e.episode_id))


def _threadless_events(source: ExportSource, dataset: str) -> Iterator[Episode]:
    """The dataset's events that belong to no thread, newest first."""
    token = ""
    while True:
        page = source.list_episodes(dataset, page_size=PAGE_SIZE, page_token=token)
        yield from (e for e in page.items if e.kind == "event" and not e.thread_id)
        token = page.next_page_token
        if not token:
            return


@dataclass
class _Fetched:
    """A thread with the first page of its messages and its episodes."""

    thread: Thread
    first: Page[Message]
    episodes: list[Episode]


def _fetch(source: ExportSource, thread: Thread) -> _Fetched:
    first = source.list_messages(thread.thread_id, page_size=PAGE_SIZE, page_token="")
    return _Fetched(thread, first, _episodes(source, thread.dataset, thread.thread_id))


def _messages(source: ExportSource, fetched: _Fetched) -> Iterator[Message]:
    """The thread's messages in order: the prefetched page, then the others."""
    yield from fetched.first.items
    token = fetched.first.next_page_token
    while token:
        page = source.list_messages(fetched.thread.thread_id, page_size=PAGE_SIZE, page_token=token)
        yield from page.items
        token = page.next_page_token


def _prefetched(
    source: ExportSource, threads: Iterable[Thread], workers: int
) -> Iterator[_Fetched]:
    """``threads`` in order, each with its first page and episodes fetched up to
    ``workers`` threads ahead: the calls' latency overlaps (most threads fit one page), and
    memory stays bounded by ``workers`` pages."""
    if workers <= 1:
        yield from (_fetch(source, t) for t in threads)
        return
    with ThreadPoolExecutor(workers, thread_name_prefix="episodic-export") as pool:
        window: deque[Future[_Fetched]] = deque()
        try:
            for thread in threads:
                window.append(pool.submit(_fetch, source, thread))
                if len(window) > workers:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:
            for future in window:
                future.cancel()


def _unseen(threads: Iterable[Thread], seen: set[str]) -> Iterator[Thread]:
    for thread in threads:
        if thread.thread_id not in seen:
            seen.add(thread.thread_id)
            yield thread


def _active_since(threads: Iterable[Thread], since: datetime) -> Iterator[Thread]:
    """The head of a most-recently-active-first listing, down to ``since``."""
    for thread in threads:
        activity = _last_activity(thread)
        if activity is not None and activity < since:
            return
        yield thread


def _last_activity(thread: Thread) -> datetime | None:
    """What ListThreads orders by (last message, end or creation), as the SDK shows it."""
    times = [t for t in (thread.last_message_at, thread.ended_at, thread.created_at) if t]
    return max(times) if times else None


@dataclass
class _Writer:
    out: IO[str]
    pseudonymiser: Pseudonymiser | None
    progress: Progress | None
    counts: ExportCounts = field(default_factory=ExportCounts)

    def write(self, record: dict[str, Any]) -> None:
        kind = record["type"]
        if self.pseudonymiser is not None:
            self.pseudonymiser.learn_record(record)  # names that appeared since pass 1
            record = self.pseudonymiser.record(record)
        self.out.write(dumps(record) + "\n")
        if kind in ("thread", "message", "episode"):
            setattr(self.counts, kind, getattr(self.counts, kind) + 1)
            if self.progress is not None:
                self.progress.count(kind)

    def thread(self, source: ExportSource, fetched: _Fetched) -> None:
        self.write(thread_record(fetched.thread))
        for message in _messages(source, fetched):
            self.write(message_record(message))
        for episode in fetched.episodes:
            self.write(episode_record(episode))


def learn_names(
    source: ExportSource,
    dataset: str,
    pseudonymiser: Pseudonymiser,
    progress: Progress | None = None,
    *,
    workers: int = PREFETCH,
) -> None:
    """The first pass of a pseudonymised export: every name the dataset's metadata and
    episodes carry (the events without a thread too, written last), so that the second
    pass masks them in text written before the record that names them (a speaker named in
    message 40, mentioned in message 3)."""
    pseudonymiser.learn_dataset(dataset)
    for fetched in _prefetched(source, _threads(source, dataset), workers):
        pseudonymiser.learn_record(thread_record(fetched.thread))
        if progress is not None:
            progress.count("thread")
        for message in _messages(source, fetched):
            pseudonymiser.learn_metadata(message.metadata)
            if progress is not None:
                progress.count("message")
        for episode in fetched.episodes:
            pseudonymiser.learn_record(episode_record(episode))
            if progress is not None:
                progress.count("episode")
    for event in _threadless_events(source, dataset):
        pseudonymiser.learn_record(episode_record(event))
        if progress is not None:
            progress.count("episode")


def export_dataset(
    source: ExportSource,
    dataset: str,
    out: IO[str],
    *,
    pseudonymiser: Pseudonymiser | None = None,
    progress: Progress | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    workers: int = PREFETCH,
) -> ExportCounts:
    """Writes ``dataset`` to ``out`` as export lines (see the module docstring) and
    returns how many records of each type it wrote. With a ``pseudonymiser`` the dataset
    is read twice: once to learn the names, once to write. ``workers`` threads fetch
    ahead (``source`` must be safe to share between threads, as the SDK client is)."""
    if pseudonymiser is not None:
        if progress is not None:
            progress.restart("learning names")
        learn_names(source, dataset, pseudonymiser, progress, workers=workers)
        if progress is not None:
            progress.restart("exporting")
    started = now()
    writer = _Writer(out, pseudonymiser, progress)
    header: dict[str, Any] = {
        "type": "dataset",
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "dataset": dataset,
        "exported_at": started.isoformat(),
        "pseudonymised": pseudonymiser is not None,
    }
    if pseudonymiser is not None:
        header["pseudonym_key_id"] = pseudonymiser.key_id
        header["identifier_keys"] = sorted(IDENTIFIER_KEYS)
    writer.write(header)
    seen: set[str] = set()
    for fetched in _prefetched(source, _unseen(_threads(source, dataset), seen), workers):
        writer.thread(source, fetched)
    # Threads written to during the export moved to the front of the listing, possibly
    # past the cursor: pick up those not exported yet.
    recent = _active_since(_threads(source, dataset), started - ACTIVITY_MARGIN)
    for fetched in _prefetched(source, _unseen(recent, seen), workers):
        writer.thread(source, fetched)
    # Events recorded without a thread (a thread's events came with its episodes).
    for event in _threadless_events(source, dataset):
        writer.write(episode_record(event))
    writer.write(
        {"type": "end", "counts": writer.counts.as_dict(), "finished_at": now().isoformat()}
    )
    out.flush()
    if progress is not None:
        progress.close()
    return writer.counts
