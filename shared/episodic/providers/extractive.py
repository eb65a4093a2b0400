"""The offline summariser: an episode built only from sentences of the conversation.

No network and no model download; deterministic; it cannot invent a fact because every
sentence it outputs was said (key learnings are lightly rewritten to the third person,
"I want X" → "User wants X", and nothing else).

How it works:

1. Split every message into sentences (a regex; NLTK's punkt would be a download) and drop
   small talk ("Hey Mel!", "Thanks!").
2. Give each sentence a vector: by default TF-IDF of its content words (stop words and
   small talk out, light stemming, document frequencies over the request's own sentences:
   no model run), or its embedding (``sentence_vectors="model"``). The centroid of the
   window's sentences (older thread sentences at half weight) is what the conversation is
   about; sentences near it are central.
3. Summary: rank sentences by maximal marginal relevance (central, but not a repeat of an
   already chosen one), fill the character budget with whole sentences (older context may use
   at most ``context_share`` of it: the summary is rolling but weighted towards the window),
   then print them in chronological order with speakers ("Caroline: …").
4. Key learnings: window sentences of the user that carry commitments, preferences or facts
   (first person + decide/prefer/want/need/plan/will/booked…, numbers, dates, names), scored
   by those signals plus centrality, de-duplicated, rewritten to the third person.
5. Entities: capitalised names (single words only when they also appear mid-sentence, so
   sentence-initial "Went" is not a name), ``@handles``, ``#ids`` (``invoice #42`` →
   ``invoice:#42``), ``project X``/``X project``, speakers' names; normalised.
6. Event type and actor: keyword rules (see :func:`classify_event`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from episodic.providers.embedding import CachedEmbedder
from episodic.providers.entities import KIND_WORDS, normalise_entities, normalise_entity
from episodic.providers.statements import (
    STOPWORDS,
    Signals,
    fact_strength,
    is_fact_statement,
    signals,
    split_sentences,
    words,
    wordset,
)
from episodic.providers.types import (
    ChatMessage,
    Embedder,
    SummaryRequest,
    SummaryResult,
    actor_of_role,
    speaker_label,
)

__all__ = [
    "ExtractiveSummariser",
    "candidate_text",
    "classify_event",
    "extract_entities",
    "split_sentences",
    "third_person",
]

# --------------------------------------------------------------------------- sentences


_MAX_SENTENCE_CHARS = 300
_INTERJECTION = re.compile(
    r"^(?:(?:hey|hi|hello|oh|ah|um|uh|haha+|lol|wow|yeah|yep|ok|okay|well|no)\b[\s,!.…-]+)+",
    re.IGNORECASE,
)


def _trim_interjections(sentence: str) -> str:
    """ "Hey, I need help" → "I need help": the interjection carries nothing a reader of the
    summary needs (and without the question it answered, a bare "No," misleads)."""
    trimmed = _INTERJECTION.sub("", sentence)
    if not trimmed or len(trimmed) < 3:
        return sentence
    return trimmed[0].upper() + trimmed[1:]


def _clip(sentence: str, limit: int = _MAX_SENTENCE_CHARS) -> str:
    """Shortens an over-long sentence at a clause boundary (a run-on chat message is often
    one 'sentence' of 800 characters)."""
    if len(sentence) <= limit:
        return sentence
    head = sentence[:limit]
    cut = max(head.rfind(sep) for sep in ("; ", ", ", " - ", " – ", ": "))
    if cut < limit // 2:
        cut = head.rfind(" ")
    return head[: max(cut, 1)].rstrip(" ,;:-–") + "…"


def candidate_text(sentence: str) -> str:
    """A sentence as the summariser reads and embeds it (interjection trimmed, clipped)."""
    return _clip(_trim_interjections(sentence))


_SMALL_TALK = wordset(
    """
    hi hey hello hiya yo bye goodbye thanks thank thx ty ok okay k sure yes yeah yep yup
    no nope cool nice great awesome amazing wow oh ah haha hahaha lol lmao omg good glad
    see seeing talk talking chat chatting soon later catch care take bet totally
    absolutely definitely exactly right true indeed welcome np sounds sound love fun
    fantastic wonderful incredible super happy hear hearing pleasure morning evening
    night day mate buddy friend appreciate appreciated agree agreed yum yummy cheers congrats
    congratulations woohoo yay aww omg dear
    """
)


def _is_small_talk(sentence: str, names: frozenset[str]) -> bool:
    tokens = words(sentence)
    content = [w for w in tokens if w not in STOPWORDS and w not in _SMALL_TALK and w not in names]
    return len(tokens) < 4 or len(content) < 2


# --------------------------------------------------------------------------- third person

_LEADING_FILLER = re.compile(
    r"^(?:(?:yeah|yes|yep|yup|oh|ah|well|so|actually|honestly|also|and|but|haha|lol|wow|hey|"
    r"hi|um|uh|ok|okay|sure|right|absolutely|totally|definitely|true|anyway|btw|plus|"
    r"thanks|thank you)\b[\s,!.…-]*)+",
    re.IGNORECASE,
)
_ADVERBS = wordset(
    """
    also just really still always finally recently already actually definitely usually
    often never sometimes totally truly honestly even only mostly probably certainly
    absolutely seriously currently
    """
)
_AUXILIARIES = wordset(
    """
    will would can could should must might may shall did had was used didn't couldn't
    wouldn't shouldn't can't won't wasn't hadn't mustn't
    """
)
_IRREGULAR_PAST = wordset(
    """
    went got made took saw bought found met did gave told said felt knew left thought
    came ran wrote began became brought chose sold spent won lost paid kept built sent
    drove flew ate drank read heard taught caught fell forgot held led meant put quit
    rode sang sat slept spoke stood swam threw understood woke wore
    """
)
# Present-tense verbs that end in "ed" like a past tense would.
_ED_BASE = wordset(
    """
    need feed proceed succeed exceed bleed breed seed speed shred embed
    """
)
_PRONOUNS = [
    (re.compile(r"\bI'm\b"), "they're"),
    (re.compile(r"\bI am\b"), "they are"),
    (re.compile(r"\bI've\b"), "they've"),
    (re.compile(r"\bI'll\b"), "they'll"),
    (re.compile(r"\bI'd\b"), "they'd"),
    (re.compile(r"\bI was\b"), "they were"),
    (re.compile(r"\bI\b"), "they"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bmine\b", re.I), "theirs"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
]
_SUBJECT = re.compile(r"^(i'm|i've|i'll|i'd|i am|i have|i)\b\s*(.*)$", re.IGNORECASE | re.DOTALL)


def _third_person_verb(verb: str) -> str:
    irregular = {"have": "has", "do": "does", "go": "goes", "am": "is", "be": "is"}
    if verb in irregular:
        return irregular[verb]
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(sentence: str, speaker: str) -> str | None:
    """Rewrites a first-person sentence about the speaker to the third person ("I'm
    looking for a car under $30k" → "User is looking for a car under $30k"). Returns None
    when the sentence does not start with "I"/"my" (the caller then quotes it as is)."""
    text = _LEADING_FILLER.sub("", sentence.replace("’", "'")).strip()
    if not text:
        return None
    if re.match(r"^my\b", text, re.IGNORECASE):
        out = f"{speaker}'s {text[2:].lstrip()}"
    else:
        match = _SUBJECT.match(text)
        if not match:
            return None
        head, rest = match.group(1).lower(), match.group(2)
        fixed = {"i'm": "is", "i am": "is", "i've": "has", "i have": "has"}
        fixed |= {"i'll": "will", "i'd": "would"}
        if head in fixed:
            out = f"{speaker} {fixed[head]} {rest}"
        else:
            words = rest.split(" ")
            adverbs: list[str] = []
            while words and words[0].lower() in _ADVERBS:
                adverbs.append(words.pop(0))
            if not words or not words[0]:
                return None
            verb, low = words[0], words[0].lower()
            if low == "don't":
                verb = "doesn't"
            elif (
                low in _AUXILIARIES
                or low in _IRREGULAR_PAST
                or (low.endswith("ed") and low not in _ED_BASE)
            ):
                pass
            elif re.fullmatch(r"[a-z]+", low):
                verb = _third_person_verb(low)
            else:
                return None
            out = " ".join([speaker, *adverbs, verb, *words[1:]])
    for pattern, replacement in _PRONOUNS:
        out = pattern.sub(replacement, out)
    return out.strip()


# --------------------------------------------------------------------------- entities

_CONNECTORS = frozenset({"of", "the", "de", "la", "du", "van", "von", "and", "&", "for"})
_NOT_NAMES = (
    STOPWORDS
    | _SMALL_TALK
    | wordset(
        """
        i'm i've i'll i'd january february march april may june july august
        september october november december monday tuesday wednesday thursday friday
        saturday sunday mon tue wed thu fri sat sun today tomorrow yesterday mr mrs
        ms dr anyway btw by maybe yes please hmm let's sorry speaking although
        though however plus p.s ps
        """
    )
)
_ENTITY_TOKEN = re.compile(r"[^\W_](?:[\w&'’.-]*[^\W_])?")
_ID = re.compile(r"(?:\b([A-Za-z]+)[\s-]+)?#([A-Za-z0-9][\w-]*)")
_HANDLE = re.compile(r"(?<![\w@])@[A-Za-z0-9_][\w.-]*[A-Za-z0-9_]")
_ID_KINDS = KIND_WORDS | {"order", "pr", "bug", "case", "task", "incident", "support", "story"}


def _strip_possessive(word: str) -> str:
    return re.sub(r"['’]s$", "", word)


def _capitalised(token: str) -> bool:
    return token[0].isupper()


def extract_entities(texts: list[str], names: list[str] | None = None) -> Counter[str]:
    """Counts the normalised entities mentioned in ``texts`` (see the module docstring);
    ``names`` (speakers' display names) count as entities when they occur."""
    sentences = [s for t in texts for s in split_sentences(t)]
    tokenised = [_ENTITY_TOKEN.findall(s) for s in sentences]
    # Words seen capitalised in the middle of a sentence are names even at a sentence start.
    mid_caps = {
        _strip_possessive(t).lower() for toks in tokenised for t in toks[1:] if _capitalised(t)
    }
    known_names = {n.lower() for n in names or []}
    counts: Counter[str] = Counter()

    for sentence in sentences:
        for match in _ID.finditer(sentence):
            kind = (match.group(1) or "").lower()
            value = f"{kind}:#{match.group(2)}" if kind in _ID_KINDS else f"#{match.group(2)}"
            counts[normalise_entity(value)] += 1
        for match in _HANDLE.finditer(sentence):
            counts[normalise_entity(match.group(0))] += 1

    for sentence in sentences:
        spans = list(_ENTITY_TOKEN.finditer(sentence))
        tokens = [m.group(0) for m in spans]

        def joined(a: int, b: int, spans: list[re.Match[str]] = spans, s: str = sentence) -> bool:
            # "Cheers, James": punctuation between two words ends a name.
            return not s[spans[a].end() : spans[b].start()].strip()

        i = 0
        while i < len(tokens):
            if not _capitalised(tokens[i]):
                i += 1
                continue
            start = i
            run = [tokens[i]]
            i += 1
            while i < len(tokens) and joined(i - 1, i):
                if _capitalised(tokens[i]):
                    run.append(tokens[i])
                    i += 1
                elif (
                    tokens[i].lower() in _CONNECTORS
                    and i + 1 < len(tokens)
                    and _capitalised(tokens[i + 1])
                    and joined(i, i + 1)
                ):
                    run += [tokens[i], tokens[i + 1]]
                    i += 2
                else:
                    break
            first = start
            # "Hey Mel", "The Corolla": drop common words at the edges of the run.
            while run and _strip_possessive(run[0]).lower() in _NOT_NAMES | _CONNECTORS:
                run.pop(0)
                first += 1
            while run and _strip_possessive(run[-1]).lower() in _NOT_NAMES | _CONNECTORS:
                run.pop()
            if not run:
                continue
            run[-1] = _strip_possessive(run[-1])
            if (
                first == 0
                and len(run) == 2
                and run[0].lower() not in mid_caps | known_names
                and run[1].lower() in mid_caps | known_names
            ):
                # "Yum Joanna": an unknown capitalised opener before a known name.
                run.pop(0)
                first += 1
            if len(run) == 1 and (
                any(ch.isdigit() for ch in run[0]) or re.fullmatch(r"[A-Z]{2,}s", run[0])
            ):
                continue  # "2026", or a plural acronym ("SUVs") naming a kind of thing
            if (
                len(run) == 1
                and first == 0
                and run[0].lower() not in mid_caps
                and run[0].lower() not in known_names
            ):
                continue  # a capitalised sentence opener, not a name
            before = tokens[first - 1].lower() if first > 0 and joined(first - 1, first) else ""
            after = tokens[i].lower() if i < len(tokens) and joined(i - 1, i) else ""
            if before in KIND_WORDS:
                run.insert(0, before)
            elif after in KIND_WORDS:
                run.append(after)
            entity = normalise_entity(" ".join(run))
            if entity and entity not in _NOT_NAMES:
                counts[entity] += 1
    return counts


def _merge_contained(counts: Counter[str]) -> Counter[str]:
    """Folds an entity into a longer one that contains its words in order ("corolla",
    "corolla hybrid" → "toyota corolla hybrid"): one thing mentioned in short and long form
    is one entity, and the long form is the most specific name."""
    merged: Counter[str] = Counter()
    entities = sorted(counts, key=lambda e: (-len(e.split()), e))
    for entity in entities:
        words = f" {entity} "
        home = next((m for m in merged if words in f" {m} " and m != entity), None)
        merged[home or entity] += counts[entity]
    return merged


# --------------------------------------------------------------------------- event type

_DECISION = re.compile(
    r"\b(decid(?:e|ed|ing)|agreed|agree to|chose|choose|chosen|going with|go with|went with|"
    r"settled on|booked|book (?:a|the|it|my|our)|signed up|committed to|confirmed|"
    r"let's go with|made up (?:my|our) mind)\b",
    re.IGNORECASE,
)
_MILESTONE = re.compile(
    r"\b(finished|completed|launched|shipped|released|graduated|deployed|went live|"
    r"got promoted|reached|achieved|accomplished|passed (?:my|the))\b",
    re.IGNORECASE,
)
# Feedback is a verdict on help, advice or information *received* (seed 002: "did the
# agent help?"), not the praise of friendly chat ("great job!", "that's so cool"): an
# evaluation with what it is about ("your advice was helpful", "the recommendation worked"),
# or an unmistakable judgement of the answer ("that's wrong", "not helpful").
_FEEDBACK_SUBJECT = re.compile(
    r"\b(?:your|the|that|this) (?:\w+ )?(?:advice|recommendations?|suggestions?|tips?|"
    r"answers?|explanations?|instructions|guidance|fix|solution|code|summary)\b",
    re.IGNORECASE,
)
_FEEDBACK_VERDICT = re.compile(
    r"\b(?:was|were|is|are|has been|have been|worked|works|did(?:n't| not) work|helped)\b"
    r"[^.!?]{0,30}?\b(helpful|unhelpful|useful|useless|wrong|incorrect|spot on|great|"
    r"excellent|perfect|awesome|terrible|awful|confusing|clear|worked|works|helped)\b"
    r"|\b(?:worked|did(?:n't| not) work|helped)\b",
    re.IGNORECASE,
)
_STRONG_FEEDBACK = re.compile(
    # "thanks, great answer", "that's some good advice" (not "got good advice from them")
    r"\b(?:that's|that is|what|such|thanks|thank you|your)\b\W+(?:(?:for|the|some|a|really|"
    r"such)\W+){0,3}(?:great|good|helpful|useful|perfect|excellent|clear|wrong|bad|terrible|"
    r"useless|confusing)\s+(?:advice|answers?|explanations?|tips?|suggestions?|"
    r"recommendations?|summary|fix|solution)\b|"
    r"\b(complain\w*|not helpful|unhelpful|that's wrong|that is wrong|you're wrong|"
    r"that's not what i asked|you misunderstood|didn't help|did not help|"
    r"(?:that|this|it) (?:was|were|is|are|have been) (?:really |so |very )?"
    r"(?:helpful|useful|unhelpful|useless))\b",
    re.IGNORECASE,
)


def _judges_help(text: str) -> bool:
    """A verdict on help received: a strong one anywhere, or a verdict and what it is
    about in one sentence."""
    if _STRONG_FEEDBACK.search(text):
        return True
    return any(
        _FEEDBACK_SUBJECT.search(sentence) and _FEEDBACK_VERDICT.search(sentence)
        for sentence in split_sentences(text)
    )


def classify_event(window: list[ChatMessage]) -> tuple[str, str]:
    """Event type and actor of a window, by keyword rules in priority order:

    tool_call (a ``tool`` message is present) > decision (decide/agree/chose/booked… in a
    user or agent message) > milestone (finished/launched/completed…) > feedback (the user
    judges help received: a verdict together with what it is about — "your advice was
    helpful" — or an unmistakable one — "that's wrong"; the "great!" of friendly chat is
    not feedback) > conversation.

    The actor is who acted for tool calls (agent) and decisions (whoever said it, the user
    first); otherwise the role that wrote most of the window's text.
    """
    volume: Counter[str] = Counter()
    for m in window:
        volume[actor_of_role(m.role)] += len(m.content) + 1
    dominant = max(sorted(volume), key=lambda a: volume[a]) if volume else "user"
    user_messages = [m for m in window if m.role == "user"]

    if any(m.role == "tool" for m in window):
        return "tool_call", "agent"
    deciders = [actor_of_role(m.role) for m in window if _DECISION.search(m.content)]
    if deciders:
        return "decision", "user" if "user" in deciders else deciders[0]
    achievers = [actor_of_role(m.role) for m in window if _MILESTONE.search(m.content)]
    if achievers:
        return "milestone", "user" if "user" in achievers else achievers[0]
    if any(_judges_help(m.content) for m in user_messages):
        return "feedback", "user"
    return "conversation", dominant


# --------------------------------------------------------------------------- summariser

#: Whether the episode's vector is the normalised mean of the vectors of the sentences the
#: summary and key learnings quote (already embedded to choose them: no model run) instead
#: of an embedding of the summary's text (one more model run per episode, on the path to
#: recall). Measured on LoCoMo (docs/benchmarks.md "Summariser, fourth pass"); a change needs a
#: re-index of the episodes' vectors. Only with ``sentence_vectors="model"`` (lexical
#: sentence vectors are not in the embedder's space).
POOL_SUMMARY_VECTOR = False


def _light_stem(word: str) -> str:
    """Folds the commonest inflections together ("trips" → "trip", "hiking" → "hik",
    "hiked" → "hik"), enough for sentences to share their content words."""
    for suffix, keep in (("ies", 3), ("ing", 4), ("ed", 4), ("es", 4), ("s", 4)):
        if (
            word.endswith(suffix)
            and len(word) - len(suffix) >= keep - 1
            and not word.endswith("ss")
        ):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def lexical_vectors(texts: list[str]) -> np.ndarray:
    """Unit TF-IDF vectors of ``texts``' content words (stop words and small talk left
    out), document frequencies counted over ``texts``; a text without content words gets a
    zero vector (similar to nothing)."""
    bags: list[Counter[str]] = []
    for text in texts:
        bag = Counter(
            _light_stem(w)
            for w in words(text)
            if len(w) > 1 and w not in STOPWORDS and w not in _SMALL_TALK
        )
        bags.append(bag)
    vocabulary: dict[str, int] = {}
    frequency: Counter[str] = Counter()
    for bag in bags:
        frequency.update(bag.keys())
        for w in bag:
            vocabulary.setdefault(w, len(vocabulary))
    out = np.zeros((len(texts), max(len(vocabulary), 1)), dtype=np.float32)
    n = len(texts)
    for row, bag in enumerate(bags):
        for w, count in bag.items():
            idf = np.log((n + 1) / (frequency[w] + 1)) + 1.0
            out[row, vocabulary[w]] = (1.0 + np.log(count)) * idf
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-9)


@dataclass
class _Candidate:
    text: str
    message: ChatMessage
    order: int  # position in the thread (message index, then sentence index)
    in_window: bool
    signals: Signals


def _mmr(vectors: np.ndarray, relevance: np.ndarray, diversity: float, limit: int) -> list[int]:
    """Maximal marginal relevance ranking: each step takes the candidate with the best
    ``(1 - diversity) * relevance - diversity * max similarity to those already taken``."""
    chosen: list[int] = []
    remaining = list(range(len(relevance)))
    max_sim = np.full(len(relevance), -1.0, dtype=np.float32)
    while remaining and len(chosen) < limit:
        penalty = np.where(max_sim > -1.0, max_sim, 0.0)
        scores = (1 - diversity) * relevance[remaining] - diversity * penalty[remaining]
        # argmax takes the first maximum: ties go to the earlier sentence, deterministically.
        best = remaining[int(np.argmax(scores))]
        chosen.append(best)
        remaining.remove(best)
        max_sim = np.maximum(max_sim, vectors @ vectors[best])
    return chosen


class ExtractiveSummariser:
    """Offline summariser: summary, key learnings and entities from the conversation's own
    sentences, chosen by centroid + MMR over their vectors. See the module docstring.

    ``sentence_vectors``: ``"lexical"`` (TF-IDF, :func:`lexical_vectors`; no model run —
    the model's run over every sentence was ~a third of an episode's model time, and LoCoMo
    recall is the same either way, docs/benchmarks.md "Summariser, fifth pass") or ``"model"`` (every
    sentence embedded with ``embedder``; for other languages with a multilingual embedder).

    ``max_summary_chars``: the summary's budget (whole sentences). ``context_share``: the
    part of it older messages (before the window) may use. ``max_context_messages``: how
    many of the newest older messages are read; embedding cost grows with them, and their
    share of the summary is small. ``previous_summary`` is not used: an extractive summary
    can only quote messages, and the older ones are in the request anyway.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        max_summary_chars: int = 800,
        max_key_learnings: int = 6,
        max_entities: int = 12,
        context_share: float = 0.3,
        max_context_messages: int = 50,
        max_candidates: int = 400,
        diversity: float = 0.35,
        cache_size: int = 4096,
        sentence_vectors: str = "lexical",
    ) -> None:
        if max_summary_chars < 100:
            raise ValueError("max_summary_chars must be >= 100")
        if not 0.0 <= context_share <= 1.0 or not 0.0 <= diversity < 1.0:
            raise ValueError("context_share must be in [0, 1] and diversity in [0, 1)")
        if sentence_vectors not in ("lexical", "model"):
            raise ValueError("sentence_vectors must be 'lexical' or 'model'")
        self.sentence_vectors = sentence_vectors
        self.embedder = embedder
        self.max_summary_chars = max_summary_chars
        self.max_key_learnings = max_key_learnings
        self.max_entities = max_entities
        self.context_share = context_share
        self.max_context_messages = max_context_messages
        self.max_candidates = max_candidates
        self.diversity = diversity
        self.name = f"extractive:{embedder.name}"
        # Rolling summaries re-read the thread's older messages on every episode; their
        # sentence vectors are remembered (bounded LRU, shared by worker threads). An
        # embedder that already remembers (the Summariser service shares one between the
        # summary and the recall index) is used as it is.
        self.vectors = (
            embedder
            if isinstance(embedder, CachedEmbedder)
            else CachedEmbedder(embedder, cache_size)
        )

    def check(self) -> None:
        """The summariser works whenever its embedder does."""
        self.embedder.check()

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.vectors.embed(texts)

    # -- candidates

    def _candidates(self, request: SummaryRequest) -> list[_Candidate]:
        names = frozenset(n.lower() for m in request.rows if m.name for n in m.name.split())
        context = request.context[-self.max_context_messages :] if self.context_share else []
        out: list[_Candidate] = []
        for index, message in enumerate([*context, *request.window]):
            if message.role == "system":
                continue  # instructions to the agent, not what happened
            for j, sentence in enumerate(split_sentences(message.content)):
                if _is_small_talk(sentence, names):
                    continue
                clipped = candidate_text(sentence)
                out.append(
                    _Candidate(
                        text=clipped,
                        message=message,
                        order=index * 10_000 + j,
                        in_window=message.sequence >= request.window_start_sequence,
                        signals=signals(clipped),
                    )
                )
        if len(out) > self.max_candidates:
            # Embedding cost grows with the candidates; keep the window and the most
            # informative sentences (ties: the newest), in thread order.
            ranked = sorted(
                out,
                key=lambda c: (c.in_window, c.signals.count, min(len(c.text), 200), c.order),
                reverse=True,
            )
            out = sorted(ranked[: self.max_candidates], key=lambda c: c.order)
        return out

    # -- parts

    def _summary(
        self, candidates: list[_Candidate], vectors: np.ndarray, window_start: int
    ) -> tuple[str, list[int]]:
        """The summary's text and the candidates it quotes (indexes; none when it had to
        clip a sentence)."""
        window_mask = np.array([c.in_window for c in candidates])
        weights = np.where(window_mask, 1.0, 0.5).astype(np.float32)
        centroid = (vectors * weights[:, None]).sum(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
        relevance = vectors @ centroid
        # Small nudges: concrete sentences beat vague ones, questions rarely carry the facts,
        # and older context counts less than the window.
        bonus = np.array([min(c.signals.count, 3) * 0.02 for c in candidates], dtype=np.float32)
        question = np.array([0.05 if c.signals.question else 0.0 for c in candidates])
        relevance = (relevance + bonus - question) * np.where(window_mask, 1.0, 0.85)
        ranking = _mmr(vectors, relevance.astype(np.float32), self.diversity, len(candidates))

        budget = self.max_summary_chars
        context_budget = int(budget * self.context_share)
        used = context_used = 0
        picked: list[_Candidate] = []
        for index in ranking:
            candidate = candidates[index]
            # Speaker label and separator cost included, so the final text fits the budget.
            cost = len(candidate.text) + len(speaker_label(candidate.message)) + 3
            if used + cost > budget:
                continue
            if not candidate.in_window:
                if context_used + cost > context_budget:
                    continue
                context_used += cost
            used += cost
            picked.append(candidate)
            if budget - used < 40:
                break
        quoted = [candidates.index(c) for c in picked]
        if not picked:  # every sentence is longer than the budget: clip the most central one
            best = candidates[ranking[0]]
            limit = budget - len(speaker_label(best.message)) - 3
            picked = [_Candidate(_clip(best.text, limit), best.message, 0, True, best.signals)]

        picked.sort(key=lambda c: c.order)
        segments: list[str] = []
        previous: ChatMessage | None = None
        for candidate in picked:
            message = candidate.message
            speaker = speaker_label(message)
            # One label for a speaker's consecutive picked lines, but never across the
            # boundary between older context and the window (different conversations).
            if (
                previous is not None
                and speaker == speaker_label(previous)
                and (message.sequence >= window_start) == (previous.sequence >= window_start)
            ):
                segments[-1] += f" {candidate.text}"
            else:
                segments.append(f"{speaker}: {candidate.text}")
            previous = message
        return " ".join(segments), quoted

    def _key_learnings(
        self, candidates: list[_Candidate], vectors: np.ndarray
    ) -> tuple[list[str], list[int]]:
        """The key learnings and the candidates they were written from (indexes)."""
        window = [i for i, c in enumerate(candidates) if c.in_window]
        users = [i for i in window if candidates[i].message.role == "user"]
        # Learnings are about the user; an agent-only window (a scripted run) falls back to
        # what the agent said.
        pool = users or [i for i in window if candidates[i].message.role == "assistant"]
        if not pool or self.max_key_learnings == 0:
            return [], []
        centroid = vectors[pool].mean(axis=0)
        centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
        scored: list[tuple[float, int]] = []
        for i in pool:
            c = candidates[i]
            if not is_fact_statement(c.text, c.signals):
                continue
            score = float(fact_strength(c.signals))
            if third_person(c.text, "x") is None and score < 3:
                continue  # not about the speaker in so many words: needs more evidence
            scored.append((score + float(vectors[i] @ centroid), i))
        scored.sort(key=lambda t: (-t[0], candidates[t[1]].order))

        chosen: list[int] = []
        for _, i in scored:
            # A paraphrase of a line already taken adds nothing.
            if any(float(vectors[i] @ vectors[j]) > 0.8 for j in chosen):
                continue
            chosen.append(i)
            if len(chosen) == self.max_key_learnings:
                break
        chosen.sort(key=lambda i: candidates[i].order)

        learnings: list[str] = []
        for i in chosen:
            c = candidates[i]
            speaker = speaker_label(c.message)
            text = third_person(c.text, speaker) or f"{speaker}: {c.text}"
            if text.lower() not in {x.lower() for x in learnings}:
                learnings.append(text)
        return learnings, chosen

    def summarise(self, request: SummaryRequest) -> SummaryResult:
        """Builds the episode from the request's messages (never raises for odd input: a
        window of small talk still yields a short summary of what was said)."""
        candidates = self._candidates(request)
        window = request.window
        if not any(c.in_window for c in candidates):
            # Only small talk (or only system messages) in the window: keep it as it is, it
            # is what happened.
            candidates += [
                _Candidate(_clip(m.content.strip()), m, 10**9 + k, True, signals(m.content))
                for k, m in enumerate(window)
                if m.content.strip()
            ]
        vector = None
        if candidates:
            texts = [c.text for c in candidates]
            lexical = self.sentence_vectors == "lexical"
            vectors = lexical_vectors(texts) if lexical else self._embed(texts)
            summary, quoted = self._summary(candidates, vectors, request.window_start_sequence)
            learnings, sources = self._key_learnings(candidates, vectors)
            if POOL_SUMMARY_VECTOR and not lexical and quoted:
                # What embedding_text would embed (summary, then key learnings), from the
                # sentences' own vectors: each quoted sentence counts once per use.
                pooled = vectors[quoted + sources].sum(axis=0)
                vector = pooled / max(float(np.linalg.norm(pooled)), 1e-9)
        else:
            summary = f"{len(window)} message(s) without text."
            learnings = []

        picked_text = [c.text for c in candidates if not c.in_window and c.text in summary]
        names = sorted({m.name for m in window if m.name})
        counts = extract_entities([m.content for m in window] + picked_text, names)
        for name in names:
            counts[normalise_entity(name)] += 1
        counts = _merge_contained(counts)
        top = [e for e, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        event_type, actor = classify_event(window)
        return SummaryResult(
            summary=summary,
            key_learnings=learnings,
            entities=normalise_entities(top[: self.max_entities]),
            event_type=event_type,
            actor=actor,
            vector=vector,
        )
