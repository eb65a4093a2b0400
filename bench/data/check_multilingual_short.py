"""Validate bench/data/multilingual_short.jsonl (stdlib only).

Usage: python3 bench/data/check_multilingual_short.py [path]

The short multilingual recall set (issue 40): 7 languages x 4 users x 4 short sessions, one
question per session. Checks the schema, unique ids, that every evidence thread exists in the
same dataset, that questions are asked after every message of their dataset, that roles
alternate (user first), that timestamps are ISO 8601 UTC with Z and in order (messages a minute
or two apart, sessions days apart), and the counts per language.

It also checks that every question *paraphrases* its gold session: a question may not share a
content word with it. Both texts are lowercased, accents stripped and split into words; a small
per-language stop-word list (articles, pronouns, prepositions, conjunctions, question words,
auxiliary and modal verbs) is removed. A content word is shared when the same word occurs in both,
when two words of 6+ characters have the same first 5 characters (inflected forms), or when a word
of 4+ characters is the other one plus at most 2 characters (short plurals: gato / gatos).
Any of these is an error. It prints a summary and exits non-zero on any problem.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

# The schema helpers of the first set's checker (same folder: run as a script, it is on the path).
from check_multilingual import check_keys, parse_ts

DEFAULT_PATH = Path(__file__).resolve().parent / "multilingual_short.jsonl"
LANGUAGES = ("fr", "es", "de", "it", "pt", "nl", "pl")
USERS_PER_LANGUAGE = 4
THREADS_PER_USER = 4
MESSAGES_PER_THREAD = (3, 6)
QUESTIONS_PER_USER = 4
MESSAGE_GAP = (timedelta(seconds=30), timedelta(minutes=4))  # "a minute or two apart"
SESSION_GAP = timedelta(days=1)  # sessions of a user are days apart
PREFIX_LEN = 5  # words of PREFIX_MIN_WORD+ characters sharing this prefix count as shared
PREFIX_MIN_WORD = 6
SHORT_MIN_WORD = 4  # a 4+ character word plus at most SHORT_SUFFIX characters counts as shared
SHORT_SUFFIX = 2

TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
DATASET_RE = re.compile(
    r"^(?:mls|ml4|ml5|ml6|ml7|ml8|ml9)-(fr|es|de|it|pt|nl|pl)-(\d{2})$"
)  # ml4-: the fourth set; ml5-: the fifth set; ml6-: the sixth set; ml7-: the seventh set;
# ml8-: the eighth set
# ml9-: the ninth set
TOP_KEYS = {"dataset", "language", "threads", "questions"}
THREAD_KEYS = {"thread_id", "started_at", "messages"}
MESSAGE_KEYS = {"role", "content", "ts", "name"}
QUESTION_KEYS = {"qid", "question", "asked_at", "evidence_threads"}
WORD_RE = re.compile(r"\w+", re.UNICODE)

# Function words only (written with accents; they are stripped like the texts).
STOP_WORDS: dict[str, str] = {
    "fr": """
        le la les l un une des du de d au aux à a ce cet cette ces c ça cela ceci qui que qu quoi
        quel quelle quels quelles lequel laquelle lesquels lesquelles dont où quand comment combien
        pourquoi je j me m moi tu te t toi il elle on nous vous ils elles se s lui leur leurs y en
        mon ma mes ton ta tes son sa ses notre nos votre vos et ou mais donc or ni car si ne n pas
        plus non oui pour par avec sans sur sous dans chez vers entre avant après pendant depuis
        comme déjà encore aussi très tout tous toute toutes alors puis ai as avons avez ont avais
        avait avions aviez avaient aurai aurais aurait eu suis es est sommes êtes sont étais était
        étions étiez étaient été être avoir serai serais sera dois doit devais devait devrais peux
        peut pouvais pouvait pourrais veux veut voulais voulait voudrais faut fallait
    """,
    "es": """
        el la los las lo un una unos unas de del al a en con sin por para sobre entre hasta desde
        hacia y e o u ni pero que qué quien quién quienes cual cuál cuáles cuando cuándo donde
        dónde adónde como cómo cuanto cuánto cuánta cuántos cuántas porque yo me mi mis mí tu tú
        te ti tus su sus se nos nuestro nuestra nuestros nuestras él ella ellos ellas le les usted
        ustedes este esta estos estas ese esa esos esas esto eso aquel aquella muy ya también más
        menos no sí he has ha hemos habéis han había habías habíamos habían haber ser soy eres es
        somos son era eras éramos eran fui fue fuimos fueron sido estar estoy está estamos están
        estaba estabas estaban estuve estuvo puedo puede podía podría quiero quería debo debía
        iba ir voy va vamos van
    """,
    "de": """
        der die das den dem des ein eine einen einem einer eines und oder aber doch denn sondern
        dass ob wenn weil als wie wo wann was wer wen wem wessen warum wieso weshalb welche
        welcher welches welchen welchem wieviel ich mich mir mein meine meinen meinem meiner
        meines du dich dir dein deine deinen deinem deiner er sie es ihn ihm ihr ihre ihren ihrem
        ihrer sein seine seinen seinem seiner uns unser unsere unseren unserem wir euch euer man
        sich in im ins an am auf aus bei beim mit nach von vom zu zum zur für über unter vor
        hinter neben zwischen durch gegen ohne um bis seit nicht kein keine keinen keinem noch
        schon auch nur sehr so da dann habe hast hat haben habt hatte hattest hatten gehabt bin
        bist ist sind seid war warst waren gewesen werde wirst wird werden wurde wurden worden
        würde kann kannst können konnte konnten könnte muss musste müssen soll sollte will wollte
        möchte mal ja nein denn eigentlich
    """,
    "it": """
        il lo la i gli le l un uno una di del dello della dei degli delle d a al allo alla ai
        agli alle ad da dal dalla dai dalle in nel nello nella nei negli nelle con col su sul
        sulla sui per tra fra e ed o ma però che chi cosa cos quale quali qual quando dove come
        quanto quanta quanti quante perché io mi me tu ti te lui lei ci noi vi voi loro si se ne
        mio mia miei mie tuo tua tuoi tue suo sua suoi sue nostro nostra questo questa questi
        queste quello quella quel non sì già ancora anche poi più molto ho hai ha abbiamo avete
        hanno avevo aveva avevamo avevano avuto avere sono sei è siamo siete ero era eravamo
        erano stato stata stati essere sarà posso può potevo poteva potrei devo deve dovevo
        doveva voglio volevo vorrei
    """,
    "pt": """
        o a os as um uma uns umas de do da dos das em no na nos nas num numa ao aos à às por pelo
        pela pelos pelas para pra com sem sobre entre até desde e ou mas nem que quê qual quais
        quando onde aonde como quanto quanta quantos quantas porque porquê quem eu me mim meu
        minha meus minhas tu te ti teu tua você vocês ele ela eles elas lhe lhes se seu sua seus
        suas nosso nossa nós isso isto esse essa este esta aquele aquela não sim já também mais
        muito ainda então foi fui era eram sou é são estava estou está estavam tinha tinham havia
        há ser estar posso pode podia devo devia quero queria ia ir vou vai vamos vão
    """,
    "nl": """
        de het een en of maar want dus dat die dit deze wat wie waar wanneer hoe hoeveel waarom
        welke welk ik mij me mijn jij je jou jouw u uw hij zij ze haar hem zijn hun wij we ons
        onze jullie zich in op aan bij met van voor naar over onder uit door tot om te na mee
        tegen tijdens zonder naast sinds vanaf toen als
        dan niet geen nog al ook wel heel erg zo er hier daar heb hebt heeft hebben had hadden
        gehad ben bent is was waren geweest word wordt worden werd werden ga gaat gaan ging kan
        kun kunt kunnen kon konden moet moest moeten wil wilde willen zou zouden mag eigenlijk
    """,
    "pl": """
        i a w we z ze na do od o u po przez przy dla bez nad pod za przed między że czy co kto
        kogo komu czym czego jak jaki jaka jakie jakiego jakiej jakim jaką jakich który która
        które którego której którym gdzie kiedy ile ilu dlaczego czemu ja mnie mi mną ty ciebie
        cię ci on ona ono oni one go jego jej ich mu im się mój moja moje mojego mojej moim moją
        moich twój twoja twoje swój swoja swoje swojego swojej swoim swoją swoich sobie nasz
        nasza nasze wasz ten ta to tego tej tym tą te tych nie tak już jeszcze też także bardzo
        więc ale lub albo oraz bo niż jako żeby aby gdy jeśli jest są był była było byli były
        być będzie będę jestem jesteś byłam byłem mogę może mogła mógł muszę musi musiałam
        musiałem chcę chciałam chciałem chciała chciał miałam miałem miała miał no
    """,
}


def normalize(text: str) -> str:
    """Lowercase and strip accents (ł, ß and the like stay as they are)."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


STOPS: dict[str, frozenset[str]] = {
    lang: frozenset(normalize(w) for w in words.split()) for lang, words in STOP_WORDS.items()
}


def content_words(text: str, lang: str) -> set[str]:
    stops = STOPS.get(lang, frozenset())
    return {w for w in WORD_RE.findall(normalize(text)) if w not in stops}


def shared_content(question: str, session: str, lang: str) -> list[str]:
    """Content words the question shares with the session, as 'q~s' pairs (sorted)."""
    q_words, s_words = content_words(question, lang), content_words(session, lang)
    shared: set[str] = set()
    s_prefix: dict[str, str] = {}
    for w in sorted(s_words):
        if len(w) >= PREFIX_MIN_WORD:
            s_prefix.setdefault(w[:PREFIX_LEN], w)
    for q in q_words:
        if q in s_words:
            shared.add(q)
            continue
        if len(q) >= PREFIX_MIN_WORD and q[:PREFIX_LEN] in s_prefix:
            shared.add(f"{q}~{s_prefix[q[:PREFIX_LEN]]}")
            continue
        for s in s_words:
            short, long_ = (q, s) if len(q) <= len(s) else (s, q)
            if (
                len(short) >= SHORT_MIN_WORD
                and len(long_) - len(short) <= SHORT_SUFFIX
                and long_.startswith(short)
            ):
                shared.add(f"{q}~{s}")
                break
    return sorted(shared)


def check_threads(
    ds: str, lang: str, threads: list, errors: list[str], counts: Counter
) -> tuple[dict[str, str], datetime | None]:
    """Check a dataset's threads; return {thread_id: text} and the last message time."""
    where = ds
    if len(threads) != THREADS_PER_USER:
        errors.append(f"{where}: {len(threads)} threads, expected {THREADS_PER_USER}")
    thread_text: dict[str, str] = {}
    last_ts: datetime | None = None  # last message of the previous thread
    user_names: set[str] = set()
    for ti, thread in enumerate(threads, 1):
        twhere = f"{where} thread {ti}"
        if not check_keys(thread, THREAD_KEYS, twhere, errors):
            continue
        tid = thread["thread_id"]
        if tid != f"{ds}/session_{ti}":
            errors.append(f"{twhere}: thread_id {tid!r}, expected '{ds}/session_{ti}'")
        if tid in thread_text:
            errors.append(f"{twhere}: duplicate thread_id {tid!r}")
        started = parse_ts(thread["started_at"], f"{twhere} started_at", errors)
        if started and last_ts and started - last_ts < SESSION_GAP:
            errors.append(
                f"{twhere}: starts at {thread['started_at']}, less than {SESSION_GAP} after the "
                "previous thread ended"
            )
        msgs = thread["messages"]
        if not isinstance(msgs, list):
            errors.append(f"{twhere}: messages is not a list")
            continue
        lo, hi = MESSAGES_PER_THREAD
        if not lo <= len(msgs) <= hi:
            errors.append(f"{twhere}: {len(msgs)} messages, expected {lo}-{hi}")
        prev_ts = None
        for mi, msg in enumerate(msgs):
            mwhere = f"{twhere} message {mi + 1}"
            if not check_keys(msg, MESSAGE_KEYS, mwhere, errors):
                continue
            expected_role = "user" if mi % 2 == 0 else "assistant"
            if msg["role"] != expected_role:
                errors.append(
                    f"{mwhere}: role {msg['role']!r}, expected {expected_role!r} "
                    "(roles alternate, user first)"
                )
            if not isinstance(msg["content"], str) or not msg["content"].strip():
                errors.append(f"{mwhere}: empty content")
            if not isinstance(msg["name"], str) or not msg["name"].strip():
                errors.append(f"{mwhere}: empty name")
            elif msg["role"] == "user":
                user_names.add(msg["name"])
            elif msg["name"] != "Assistant":
                errors.append(f"{mwhere}: assistant name {msg['name']!r}, expected 'Assistant'")
            ts = parse_ts(msg["ts"], f"{mwhere} ts", errors)
            if ts is None:
                continue
            if mi == 0 and started and ts != started:
                errors.append(f"{mwhere}: first ts {msg['ts']} differs from started_at")
            if prev_ts:
                gap = ts - prev_ts
                if gap <= timedelta(0):
                    errors.append(f"{mwhere}: ts {msg['ts']} not after the previous message")
                elif not MESSAGE_GAP[0] <= gap <= MESSAGE_GAP[1]:
                    errors.append(
                        f"{mwhere}: {gap} after the previous message, expected 30 s-4 min"
                    )
            prev_ts = ts
        last_ts = prev_ts or last_ts
        thread_text[tid] = "\n".join(
            m.get("content", "")
            for m in msgs
            if isinstance(m, dict) and isinstance(m.get("content"), str)
        )
        counts["threads"] += 1
        counts["messages"] += len(msgs)
        counts[f"len{len(msgs)}"] += 1
    if len(user_names) > 1:
        errors.append(f"{where}: several user names {sorted(user_names)}")
    return thread_text, last_ts


def check_questions(
    ds: str,
    lang: str,
    questions: list,
    thread_text: dict[str, str],
    last_ts: datetime | None,
    qids_seen: set[str],
    errors: list[str],
    counts: Counter,
) -> None:
    where = ds
    if len(questions) != QUESTIONS_PER_USER:
        errors.append(f"{where}: {len(questions)} questions, expected {QUESTIONS_PER_USER}")
    gold_seen: Counter = Counter()
    for qi, q in enumerate(questions, 1):
        qwhere = f"{where} question {qi}"
        if not check_keys(q, QUESTION_KEYS, qwhere, errors):
            continue
        qid = q["qid"]
        if qid != f"{ds}/q{qi}":
            errors.append(f"{qwhere}: qid {qid!r}, expected '{ds}/q{qi}'")
        if qid in qids_seen:
            errors.append(f"{qwhere}: duplicate qid {qid!r}")
        qids_seen.add(qid)
        text = q["question"]
        if not isinstance(text, str) or not text.strip():
            errors.append(f"{qwhere}: empty question")
            text = ""
        elif not text.rstrip().endswith("?"):
            errors.append(f"{qwhere}: question does not end with '?'")
        elif lang == "es" and "¿" not in text:
            errors.append(f"{qwhere}: Spanish question without opening '¿'")
        asked = parse_ts(q["asked_at"], f"{qwhere} asked_at", errors)
        if asked and asked > datetime.now(UTC):  # so is every message before it
            errors.append(
                f"{qwhere}: asked_at {q['asked_at']} is in the future: the suite refuses "
                "messages dated ahead of its clock"
            )
        if asked and last_ts and asked <= last_ts:
            errors.append(
                f"{qwhere}: asked_at {q['asked_at']} is not after every message of the dataset"
            )
        ev = q["evidence_threads"]
        if not isinstance(ev, list) or len(ev) != 1:
            errors.append(f"{qwhere}: evidence_threads must list exactly 1 thread")
            continue
        tid = ev[0]
        if tid not in thread_text:
            errors.append(f"{qwhere}: evidence thread {tid!r} is not a thread of {ds}")
            continue
        gold_seen[tid] += 1
        shared = shared_content(text, thread_text[tid], lang)
        if shared:
            errors.append(f"{qwhere}: shares content words with {tid}: {', '.join(shared)}")
            counts["shared"] += 1
        counts["questions"] += 1
    for tid in thread_text:
        if gold_seen[tid] != 1:
            errors.append(
                f"{where}: {tid} is the gold session of {gold_seen[tid]} questions, not 1"
            )


def check(path: Path) -> int:
    errors: list[str] = []
    datasets_seen: set[str] = set()
    qids_seen: set[str] = set()
    per_lang: dict[str, Counter] = defaultdict(Counter)

    lines = path.read_text(encoding="utf-8").splitlines()
    for lineno, line in enumerate(lines, 1):
        where = f"line {lineno}"
        if not line.strip():
            errors.append(f"{where}: blank line")
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(f"{where}: invalid JSON ({exc})")
            continue
        if not check_keys(row, TOP_KEYS, where, errors):
            continue
        ds, lang = row["dataset"], row["language"]
        m = DATASET_RE.match(ds) if isinstance(ds, str) else None
        if not m:
            errors.append(f"{where}: dataset {ds!r} does not look like mls-fr-01")
            continue
        if lang not in LANGUAGES:
            errors.append(f"{ds}: language {lang!r} not in {LANGUAGES}")
            continue
        if m.group(1) != lang:
            errors.append(f"{ds}: language {lang!r} does not match the dataset id")
        if not 1 <= int(m.group(2)) <= USERS_PER_LANGUAGE:
            errors.append(f"{ds}: user number outside 01-{USERS_PER_LANGUAGE:02d}")
        if ds in datasets_seen:
            errors.append(f"{ds}: duplicate dataset")
        datasets_seen.add(ds)
        counts = per_lang[lang]
        counts["users"] += 1
        if not isinstance(row["threads"], list) or not isinstance(row["questions"], list):
            errors.append(f"{ds}: threads and questions must be lists")
            continue
        thread_text, last_ts = check_threads(ds, lang, row["threads"], errors, counts)
        check_questions(ds, lang, row["questions"], thread_text, last_ts, qids_seen, errors, counts)

    for lang in LANGUAGES:
        if per_lang[lang]["users"] != USERS_PER_LANGUAGE:
            errors.append(f"{lang}: {per_lang[lang]['users']} users, expected {USERS_PER_LANGUAGE}")

    lengths = range(MESSAGES_PER_THREAD[0], MESSAGES_PER_THREAD[1] + 1)
    print(f"{path}")
    header = f"{'lang':<5} {'users':>5} {'threads':>7} {'messages':>8} {'questions':>9} "
    header += " ".join(f"{f'{n}-msg':>5}" for n in lengths) + f" {'shared-word qs':>14}"
    print(header)
    total: Counter = Counter()
    for lang in LANGUAGES:
        total.update(per_lang[lang])
    for lang, c in [*((lang, per_lang[lang]) for lang in LANGUAGES), ("all", total)]:
        print(
            f"{lang:<5} {c['users']:>5} {c['threads']:>7} {c['messages']:>8} {c['questions']:>9} "
            + " ".join(f"{c[f'len{n}']:>5}" for n in lengths)
            + f" {c['shared']:>14}"
        )
    if errors:
        for e in errors:
            print(f"error: {e}")
        print(f"FAILED: {len(errors)} problem(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(check(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_PATH))
