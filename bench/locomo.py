"""Retrieval quality on LoCoMo (Q4 in docs/spec.md): memdir's search against plain FTS5 BM25.

Each conversation goes into a fresh store (a temp dir) through memdir's API, one item per
dialog turn, `<speaker>: <text>` plus ` [image: <blip_caption>]` when the turn shared an
image, under a memdir.testing.FixedClock set to the session's date, in each layout of
--layouts (default sessions,daily):
- sessions: each LoCoMo session is one memdir session (started, its turns written as
  facts, category "learning", with Memory.add_facts, ended), so a fact's `created` is its
  session's date and its provenance its session: what an agent's store looks like;
- daily: each turn an entry of its session day's log (Memory.daily_append, a minute
  apart, so each is its own `## HH:MM` section and chunk), searched as kind daily, a hit
  mapped back to its turn by the lines it covers;
- facts: the same facts written by no session.
The first layout is reported under plain labels (`lexical`), the others with theirs
(`lexical · daily`). Each question of categories 1-4 is asked through
`Memory.search(question, limit=10, kinds=["fact"] (["daily"]), mode=...)`; its gold items are its
evidence turns. The baseline is a separate raw sqlite3 FTS5 table over the same turns
(tokenizer 'porter unicode61', bm25, query = OR of the question's quoted non-stopword
tokens), built and asked in the same run.

Metrics (bench/README.md beside the data): turn-level R@1/R@5/R@10 (|gold ∩ top-k| /
|gold|), MRR of the first gold turn (0 when none is in the top 10), session-level R@1/R@3
(the ranking collapsed to sessions by first appearance); overall and per category.

Hybrid runs once per fusion setting given with --weights (default: memdir's own [search]
settings); each setting is written to the store's config.toml, as a user would.
Item options (the default is the README's protocol, one plain turn per item):
--context N makes each item also carry the N turns before it, after the turn itself (so a
hit still shows it first), --last-sentence keeps only the last sentence of those turns
(what this turn answers), --dates appends the session's day. The `bm25` row always
indexes the plain turns; with an item option, `bm25 (same items)` indexes the items.

The model's vectors are kept by text hash in --vector-cache (bench/results/cache/, not
in git), so only the first run of a given item text pays for the model (~1 min for the
dev split here); later runs take ~10 s.

    python bench/locomo.py DATA.json [--modes lexical,semantic,hybrid] [--json OUT]
        [--limit-convs N] [--weights 1:0.3,1:1] [--min-score 0.5]
        [--context 1 --last-sentence --dates] [--details questions.jsonl]
"""

from __future__ import annotations

import argparse
import calendar
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from typing import Any

import common

NAME = "locomo"
SAME_ITEMS = "bm25 (same items)"
LIMIT = 10
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
METRICS = ("r1", "r5", "r10", "mrr", "s_r1", "s_r3")
HEADERS = {
    "r1": "R@1",
    "r5": "R@5",
    "r10": "R@10",
    "mrr": "MRR",
    "s_r1": "sess R@1",
    "s_r3": "sess R@3",
}
DIA_RE = re.compile(r"D:?(\d+):(\d+)")
SESSION_RE = re.compile(r"session_(\d+)")
DATE_FORMATS = (
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
    "%d %B, %Y",
    "%d %B %Y",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d",
)
WORD_RE = re.compile(r"\w+")
SENTENCE_RE = re.compile(r"(?<=[.!?])\s+")
# The baseline's stopwords: NLTK's English list, so the baseline owes nothing to memdir's.
BASELINE_STOPWORDS = frozenset(
    """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be
been being have has had having do does did doing a an the and but if or because as until
while of at by for with about against between into through during before after above below
to from up down in out on off over under again further then once here there when where why
how all any both each few more most other some such no nor not only own same so than too
very s t can will just don don't should should've now d ll m o re ve y ain aren aren't
couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't
ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't
weren weren't won won't wouldn wouldn't
""".split()
)


# -- data ------------------------------------------------------------------------------


class Turn:
    __slots__ = ("dia_id", "session", "speaker", "text", "date")

    def __init__(self, dia_id: str, session: int, speaker: str, text: str, date: str) -> None:
        self.dia_id, self.session, self.speaker = dia_id, session, speaker
        self.text, self.date = text, date


class Question:
    __slots__ = ("text", "category", "gold")

    def __init__(self, text: str, category: int, gold: list[str]) -> None:
        self.text, self.category, self.gold = text, category, gold


def normalise_dia(raw: str) -> str | None:
    """'D11:26', 'D:11:26' and 'D11:026' -> 'D11:26'; None when it cannot be read."""
    match = DIA_RE.fullmatch(raw.strip())
    return f"D{int(match[1])}:{int(match[2])}" if match else None


def parse_date(text: str) -> float | None:
    """A session's date_time ('1:56 pm on 8 May, 2023') as unix time, read as UTC."""
    cleaned = " ".join(str(text).split())
    for fmt in DATE_FORMATS:
        try:
            moment = datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
        return float(calendar.timegm(moment.timetuple()))
    return None


def load_conversation(
    sample: dict[str, Any], counts: Counter[str]
) -> tuple[list[list[Turn]], list[float | None]]:
    """The sessions in order (each a list of turns) and each session's date (or None)."""
    conv = sample["conversation"]
    numbers = sorted(
        int(m[1])
        for key in conv
        if (m := SESSION_RE.fullmatch(key)) and isinstance(conv[key], list)
    )
    sessions, dates = [], []
    for number in numbers:
        raw_date = conv.get(f"session_{number}_date_time")
        date = parse_date(raw_date) if raw_date else None
        if date is None:
            counts["session dates unreadable"] += 1
        turns = []
        for turn in conv[f"session_{number}"]:
            dia_id = normalise_dia(str(turn.get("dia_id", "")))
            if dia_id is None:
                counts["turns with an unreadable dia_id"] += 1
                continue
            text = f"{turn.get('speaker', '?')}: {turn.get('text', '')}"
            if turn.get("blip_caption"):
                text += f" [image: {turn['blip_caption']}]"
            day = "" if date is None else time.strftime("%-d %B %Y", time.gmtime(date))
            turns.append(Turn(dia_id, number, str(turn.get("speaker", "?")), text, day))
        sessions.append(turns)
        dates.append(date)
    return sessions, dates


def load_questions(
    sample: dict[str, Any], known: set[str], categories: set[int], counts: Counter[str]
) -> list[Question]:
    """The questions of the wanted categories with their evidence normalised: ids in one
    string split ('D8:6; D9:17'), 'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'; unreadable ids
    and ids of no turn skipped; questions left without evidence skipped. Counted."""
    out = []
    for qa in sample.get("qa", []):
        category = qa.get("category")
        if category not in categories:
            continue
        gold: list[str] = []
        for raw in qa.get("evidence") or []:
            parts = [p for p in re.split(r"[;,\s]+", str(raw)) if p]
            if len(parts) > 1:
                counts["evidence strings holding several ids (split)"] += 1
            for part in parts:
                dia_id = normalise_dia(part)
                if dia_id is None:
                    counts[f"evidence ids unreadable (skipped): {part!r}"] += 1
                    continue
                if dia_id != part:
                    counts[f"evidence ids normalised: {part!r} -> {dia_id!r}"] += 1
                if dia_id not in known:
                    counts[f"evidence ids of no turn (skipped): {dia_id!r}"] += 1
                    continue
                if dia_id not in gold:
                    gold.append(dia_id)
        if not gold:
            counts[
                "questions skipped: no usable evidence"
                if qa.get("evidence")
                else "questions skipped: empty evidence"
            ] += 1
            continue
        out.append(Question(str(qa.get("question", "")), category, gold))
    return out


def item_text(
    turns: list[Turn], index: int, context: int, dates: bool, last_sentence: bool = False
) -> str:
    """One turn's item: the turn, then (with --context N) the N turns before it (or only
    their last sentence: what this turn answers), then (with --dates) its session's day."""
    text = turns[index].text
    before = [t.text for t in turns[max(0, index - context) : index]]
    if last_sentence:
        before = [_last_sentence(t) for t in before]
    if before:
        text += " (after: " + " / ".join(before) + ")"
    if dates and turns[index].date:
        text += f" ({turns[index].date})"
    return text


def _last_sentence(text: str) -> str:
    text = re.sub(r" \[image: [^\]]*\]$", "", text)
    speaker, _, said = text.partition(": ")
    parts = [p for p in SENTENCE_RE.split(said.strip()) if p.strip()]
    return f"{speaker}: {parts[-1].strip()}" if parts else text


# -- metrics ---------------------------------------------------------------------------


def score(ranking: list[str], gold: list[str], session_of: dict[str, int]) -> dict[str, float]:
    gold_set = set(gold)
    result = {f"r{k}": len(gold_set & set(ranking[:k])) / len(gold_set) for k in (1, 5, 10)}
    first = next((i for i, dia in enumerate(ranking) if dia in gold_set), None)
    result["mrr"] = 0.0 if first is None else 1.0 / (first + 1)
    sessions = list(dict.fromkeys(session_of[d] for d in ranking))
    gold_sessions = {session_of[d] for d in gold}
    for k in (1, 3):
        result[f"s_r{k}"] = len(gold_sessions & set(sessions[:k])) / len(gold_sessions)
    return result


def average(scores: list[dict[str, float]]) -> dict[str, float]:
    n = len(scores)
    return {m: (sum(s[m] for s in scores) / n if n else float("nan")) for m in METRICS}


# -- the baseline: raw FTS5 ------------------------------------------------------------


class BM25:
    """Plain SQLite FTS5 over the turns: bm25(), porter unicode61, OR of quoted tokens."""

    def __init__(self, texts: list[str], ids: list[str]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE turns USING fts5(content, tokenize='porter unicode61')"
        )
        self.db.executemany(
            "INSERT INTO turns(rowid, content) VALUES (?, ?)", list(enumerate(texts))
        )
        self.ids = ids

    def search(self, question: str, limit: int = LIMIT) -> list[str]:
        tokens = [
            w
            for w in dict.fromkeys(WORD_RE.findall(question.lower()))
            if w not in BASELINE_STOPWORDS and w.strip("_")
        ]
        if not tokens:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in tokens)
        rows = self.db.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?",
            (match, limit),
        ).fetchall()
        return [self.ids[row[0]] for row in rows]

    def close(self) -> None:
        self.db.close()


# -- memdir ----------------------------------------------------------------------------


class CachedEmbedder:
    """memdir's default model, remembering every text it embedded, in memory and (unless
    --vector-cache none) in a SQLite file keyed by the text's hash: hybrid settings after
    the first, and later runs, cost no model time. Same name and vectors as the model."""

    def __init__(self, cache_path: str | None) -> None:
        from memdir.storage import embeddings

        self.model = embeddings.default_embedder()
        self.name, self.dim = self.model.name, self.model.dim
        self.cache: dict[str, Any] = {}
        self.seconds = 0.0
        self.embedded = self.reused = 0
        self.db = None
        if cache_path:
            os.makedirs(os.path.dirname(os.path.abspath(cache_path)), exist_ok=True)
            self.db = sqlite3.connect(cache_path)
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, hash TEXT, "
                "vector BLOB, PRIMARY KEY (model, hash))"
            )

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo and self.db is not None:
            for text in todo:
                row = self.db.execute(
                    "SELECT vector FROM vectors WHERE model = ? AND hash = ?",
                    (self.name, _hash(text)),
                ).fetchone()
                if row is not None:
                    self.cache[text] = np.frombuffer(row[0], dtype="<f4")
                    self.reused += 1
            todo = [t for t in todo if t not in self.cache]
        if todo:
            started = time.perf_counter()
            vectors = self.model.embed(todo)
            self.seconds += time.perf_counter() - started
            self.embedded += len(todo)
            for text, vector in zip(todo, vectors, strict=True):
                self.cache[text] = vector
            if self.db is not None:
                with self.db:
                    self.db.executemany(
                        "INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)",
                        [
                            (self.name, _hash(t), np.asarray(v, dtype="<f4").tobytes())
                            for t, v in zip(todo, vectors, strict=True)
                        ],
                    )
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])

    def close(self) -> None:
        if self.db is not None:
            self.db.close()


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Setting:
    """One way of asking memdir: a mode and (semantic, hybrid) its [search] settings."""

    def __init__(
        self,
        mode: str,
        lexical_weight: float | None = None,
        semantic_weight: float | None = None,
        rrf_k: int | None = None,
        min_score: float | None = None,
    ) -> None:
        self.mode, self.min_score = mode, min_score
        self.lexical_weight, self.semantic_weight, self.rrf_k = (
            lexical_weight,
            semantic_weight,
            rrf_k,
        )

    @property
    def label(self) -> str:
        if self.mode == "lexical":
            return "lexical"
        parts = []
        if self.mode == "hybrid":
            parts.append(
                f"{_num(self.lexical_weight)}/{_num(self.semantic_weight)}"
                + ("" if self.rrf_k is None else f" k={self.rrf_k}")
            )
        parts.append(f"min={_num(self.min_score)}")
        return f"{self.mode} ({', '.join(parts)})"

    def config(self) -> str:
        lines = ["[search]", f'mode = "{self.mode}"']
        for key in ("lexical_weight", "semantic_weight", "min_score"):
            if getattr(self, key) is not None:
                lines.append(f"{key} = {float(getattr(self, key))!r}")
        if self.rrf_k is not None:
            lines.append(f"rrf_k = {int(self.rrf_k)}")
        return "\n".join(lines) + "\n"

    def params(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "lexical_weight": self.lexical_weight,
            "semantic_weight": self.semantic_weight,
            "rrf_k": self.rrf_k,
            "min_score": self.min_score,
        }


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def settings_for(modes: list[str], weights: str | None, min_scores: str | None) -> list[Setting]:
    from memdir.settings import DEFAULTS

    mins = [float(x) for x in min_scores.split(",")] if min_scores else [DEFAULTS.search_min_score]
    combos: list[tuple[float, float, int | None]] = []
    for part in weights.split(",") if weights else []:
        fields = part.strip().split(":")
        if len(fields) not in (2, 3):
            raise SystemExit(f"--weights: {part!r}: give LEXICAL:SEMANTIC[:RRF_K]")
        combos.append(
            (float(fields[0]), float(fields[1]), int(fields[2]) if len(fields) == 3 else None)
        )
    if not combos:
        combos = [(DEFAULTS.search_lexical_weight, DEFAULTS.search_semantic_weight, None)]
    out = []
    for mode in modes:
        if mode == "lexical":
            out.append(Setting("lexical"))
        elif mode == "semantic":
            out += [Setting("semantic", min_score=m) for m in mins]
        else:
            out += [Setting("hybrid", lw, sw, k, m) for lw, sw, k in combos for m in mins]
    return out


def open_store(state: str, setting: Setting, clock: Any, embedder: Any) -> Any:
    with open(os.path.join(state, "config.toml"), "w", encoding="utf-8") as handle:
        handle.write(setting.config())
    return common.open_memory(state, clock=clock, embedder=embedder)


def run_conversation(
    sample: dict[str, Any],
    questions: list[Question],
    sessions: list[list[Turn]],
    dates: list[float | None],
    settings: list[Setting],
    embedder: Any,
    args: Any,
    timing: Counter[str],
    errors: Counter[str],
) -> dict[str, list[list[str]]]:
    """{system label: the top-10 dia_ids of every question}, bm25 included."""
    from memdir.errors import MemdirError
    from memdir.testing import FixedClock

    turns = [t for session in sessions for t in session]
    items = [
        [
            item_text(session, i, args.context, args.dates, args.last_sentence)
            for i in range(len(session))
        ]
        for session in sessions
    ]
    ids = [t.dia_id for t in turns]
    rankings: dict[str, list[list[str]]] = {}
    started = time.perf_counter()
    for label, texts in (
        ("bm25", [t.text for t in turns]),
        (SAME_ITEMS, [text for part in items for text in part]),
    ):
        if label == SAME_ITEMS and not (args.context or args.dates):
            continue
        baseline = BM25(texts, ids)
        rankings[label] = [baseline.search(q.text) for q in questions]
        baseline.close()
    timing["bm25 s"] += time.perf_counter() - started
    for layout in args.layouts:
        kinds: list[str] = ["daily"] if layout == "daily" else ["fact"]
        with tempfile.TemporaryDirectory(prefix="memdir-locomo-") as state:
            clock = FixedClock()
            started = time.perf_counter()
            # written under a setting that embeds: a lexical store's reindex embeds nothing
            writer = next((s for s in settings if s.mode != "lexical"), settings[0])
            with open_store(state, writer, clock, embedder) as memory:
                answer_of = ingest(memory, clock, layout, sessions, items, dates)
                timing[f"ingest {layout} s"] += time.perf_counter() - started
                if any(s.mode != "lexical" for s in settings):
                    started = time.perf_counter()
                    memory.reindex()  # every item gets its vector before the first question
                    timing[f"embed items {layout} s"] += time.perf_counter() - started
            for setting in settings:
                label = system_label(setting.label, layout, args.layouts)
                with open_store(state, setting, clock, embedder) as memory:
                    started = time.perf_counter()
                    ranked = []
                    for q in questions:
                        try:
                            hits = memory.search(
                                q.text, limit=LIMIT, kinds=kinds, mode=setting.mode
                            )
                        except MemdirError as exc:
                            errors[f"{label}: {type(exc).__name__}"] += 1
                            hits = []
                        ranked.append(_dia_ids(hits, answer_of))
                    rankings[label] = ranked
                    timing[f"{label} s"] += time.perf_counter() - started
    return rankings


LAYOUTS = ("sessions", "daily", "facts")


def system_label(label: str, layout: str, layouts: list[str]) -> str:
    """The first layout asked (by default `sessions`, what an agent's store looks like)
    keeps the plain label; the others say theirs."""
    return label if layout == layouts[0] else f"{label} · {layout}"


def ingest(
    memory: Any,
    clock: Any,
    layout: str,
    sessions: list[list[Turn]],
    items: list[list[str]],
    dates: list[float | None],
) -> Callable[[Any], str | None]:
    """Write the conversation in `layout`; returns what maps a hit to its dia_id.

    - sessions: each LoCoMo session is one memdir session writing its turns as facts;
    - facts: the same facts, written by no session;
    - daily: each turn an entry of its session day's log (a `## HH:MM` section, a minute
      apart, so each is a chunk of its own), found back by the lines a hit covers."""
    import bisect

    last = clock.now
    fact_dia: dict[int, str] = {}
    starts: dict[str, list[tuple[int, str]]] = {}  # daily path -> (first line, dia_id)
    for session, texts, date in zip(sessions, items, dates, strict=True):
        # a session without a readable date: a day after the one before; never back in time
        clock.now = max(date if date is not None else last + 86_400, last + 60)
        if layout == "daily":
            for turn, text in zip(session, texts, strict=True):
                written = memory.daily_append(text)
                lines = memory.get(written.path).lines
                heading = max(n for n, line in lines if line.startswith("## "))
                starts.setdefault(written.path, []).append((heading, turn.dia_id))
                clock.now += 60
        else:
            session_id = None
            if layout == "sessions":
                session_id = memory.start_session("cli").id
                memory.bind_session(session_id)
            fact_ids = memory.add_facts([(text, "learning") for text in texts])
            fact_dia.update(zip(fact_ids, (t.dia_id for t in session), strict=True))
            if session_id is not None:
                memory.end_session(session_id)
                memory.bind_session(None)
            clock.now += 60 * len(texts)
        last = clock.now

    def answer_of(hit: Any) -> str | None:
        if hit.kind == "fact":
            return fact_dia.get(hit.id)
        found = starts.get(hit.path or "")
        if not found or hit.lines is None:
            return None
        at = bisect.bisect_right(found, (hit.lines[0], "\uffff")) - 1
        return found[at][1] if at >= 0 else None

    return answer_of


def _dia_ids(hits: list[Any], answer_of: Callable[[Any], str | None]) -> list[str]:
    """The hits' dia_ids in rank order, each once (a long turn may be two chunks)."""
    out: list[str] = []
    for hit in hits:
        dia = answer_of(hit)
        if dia is not None and dia not in out:
            out.append(dia)
    return out


# -- main ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", help="a LoCoMo-format JSON file")
    parser.add_argument(
        "--modes",
        default=None,
        help="comma-separated: lexical, semantic, hybrid "
        "(default: all three with the embeddings extra, else lexical)",
    )
    parser.add_argument(
        "--json",
        default=os.path.join(common.RESULTS_DIR, f"{NAME}.json"),
        help="where the JSON result goes (default bench/results/locomo.json)",
    )
    parser.add_argument("--limit-convs", type=int, default=None, help="only the first N")
    parser.add_argument(
        "--weights",
        default=None,
        help="hybrid settings LEXICAL_WEIGHT:SEMANTIC_WEIGHT[:RRF_K],... "
        "(default: memdir's [search] defaults; rrf_k only merges "
        "the lexical tiers, so it does not matter here)",
    )
    parser.add_argument(
        "--min-score",
        default=None,
        help="semantic min_score value(s), comma-separated (default: memdir's)",
    )
    parser.add_argument(
        "--context", type=int, default=0, help="also index the N turns before each turn in its item"
    )
    parser.add_argument(
        "--last-sentence",
        action="store_true",
        help="with --context: only the last sentence of each turn before",
    )
    parser.add_argument(
        "--dates", action="store_true", help="also write each turn's session day into its item"
    )
    parser.add_argument(
        "--layouts",
        default="sessions,daily",
        help="how each conversation is written, comma-separated: sessions (each LoCoMo "
        "session one memdir session writing facts), daily (each turn an entry of its day's "
        "log), facts (facts of no session); the first is reported under plain labels",
    )
    parser.add_argument("--categories", default="1,2,3,4")
    parser.add_argument(
        "--vector-cache",
        default=os.path.join(common.CACHE_DIR, "locomo-vectors.sqlite"),
        help="SQLite file of the model's vectors by text hash, reused "
        "across runs ('none': keep nothing)",
    )
    parser.add_argument(
        "--details", default=None, help="write every question's rankings to this JSON-lines file"
    )
    args = parser.parse_args(argv)

    from memdir.storage import embeddings

    if args.modes is None:
        modes = ["lexical", "semantic", "hybrid"] if embeddings.available() else ["lexical"]
    else:
        modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or not set(modes) <= {"lexical", "semantic", "hybrid"}:
        raise SystemExit(f"--modes: {args.modes!r}: use lexical, semantic, hybrid")
    if set(modes) - {"lexical"} and not embeddings.available():
        raise SystemExit(embeddings.INSTALL)
    settings = settings_for(modes, args.weights, args.min_score)
    args.layouts = [x.strip() for x in args.layouts.split(",") if x.strip()]
    if (
        not args.layouts
        or not set(args.layouts) <= set(LAYOUTS)
        or len(set(args.layouts)) < len(args.layouts)
    ):
        raise SystemExit(f"--layouts: {','.join(args.layouts)!r}: use {', '.join(LAYOUTS)}")
    categories = {int(c) for c in args.categories.split(",")}
    with open(args.data, encoding="utf-8") as handle:
        data = json.load(handle)
    if isinstance(data, dict):
        data = [data]
    if args.limit_convs is not None:
        data = data[: args.limit_convs]

    cache = None if args.vector_cache in ("", "none") else args.vector_cache
    embedder = CachedEmbedder(cache) if set(modes) - {"lexical"} else None
    counts: Counter[str] = Counter()
    timing: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    per_question: list[tuple[int, dict[str, dict[str, float]]]] = []
    details = open(args.details, "w", encoding="utf-8") if args.details else None  # noqa: SIM115
    started = time.perf_counter()
    turns_total = 0
    for number, sample in enumerate(data):
        sessions, dates = load_conversation(sample, counts)
        turns = [t for s in sessions for t in s]
        turns_total += len(turns)
        session_of = {t.dia_id: t.session for t in turns}
        questions = load_questions(sample, set(session_of), categories, counts)
        name = sample.get("sample_id", f"#{number}")
        print(
            f"{name}: {len(sessions)} sessions, {len(turns)} turns, {len(questions)} questions",
            file=sys.stderr,
            flush=True,
        )
        if not questions or not turns:
            continue
        rankings = run_conversation(
            sample, questions, sessions, dates, settings, embedder, args, timing, errors
        )
        for i, q in enumerate(questions):
            per_question.append(
                (
                    q.category,
                    {
                        label: score(ranked[i], q.gold, session_of)
                        for label, ranked in rankings.items()
                    },
                )
            )
            if details is not None:
                details.write(
                    json.dumps(
                        {
                            "conv": name,
                            "question": q.text,
                            "category": q.category,
                            "gold": q.gold,
                            "rankings": {label: ranked[i] for label, ranked in rankings.items()},
                        }
                    )
                    + "\n"
                )
    if details is not None:
        details.close()
    took = time.perf_counter() - started

    if embedder is not None:
        embedder.close()
        timing["model s"] = embedder.seconds
        counts["texts embedded by the model"] = embedder.embedded
        counts["vectors reused from the vector cache"] = embedder.reused
    systems = [
        "bm25",
        *([SAME_ITEMS] if args.context or args.dates else []),
        *(system_label(s.label, layout, args.layouts) for layout in args.layouts for s in settings),
    ]
    groups = [("all", None), *((CATEGORY_NAMES.get(c, str(c)), c) for c in sorted(categories))]
    rows = []
    for system in systems:
        for group, category in groups:
            scores = [s[system] for c, s in per_question if category in (None, c)]
            rows.append(
                {"system": system, "category": group, "questions": len(scores), **average(scores)}
            )
    overall = {r["system"]: r for r in rows if r["category"] == "all"}

    report_counts(counts, errors, len(per_question))
    columns = [
        ("system", "system", ""),
        ("questions", "n", ","),
        *((m, HEADERS[m], ".3f") for m in METRICS),
    ]
    common.print_table(
        f"LoCoMo retrieval, categories {args.categories} "
        f"({len(per_question):,} questions, {len(data)} conversations, "
        f"{turns_total:,} turns, context {args.context})",
        columns,
        list(overall.values()),
    )
    by_cat = [("system", "system", "")]
    for group, _ in groups[1:]:
        by_cat += [(f"{group}:r10", f"{group} R@10", ".3f"), (f"{group}:mrr", "MRR", ".3f")]
    cat_rows = []
    for system in systems:
        line: dict[str, Any] = {"system": system}
        for r in rows:
            if r["system"] == system and r["category"] != "all":
                line[f"{r['category']}:r10"], line[f"{r['category']}:mrr"] = r["r10"], r["mrr"]
        cat_rows.append(line)
    common.print_table("Per category (R@10, MRR)", by_cat, cat_rows)
    timing_rows = [{"step": k[:-2], "seconds": v} for k, v in timing.items()]
    common.print_table("Time", [("step", "step", ""), ("seconds", "seconds", ".1f")], timing_rows)

    hybrids = [s.label for s in settings if s.mode == "hybrid"]
    best = max(
        hybrids, key=lambda label: (overall[label]["r10"], overall[label]["mrr"]), default=None
    )
    summary: dict[str, Any] = {
        "questions": len(per_question),
        "conversations": len(data),
        "turns": turns_total,
        "overall": {system: {m: overall[system][m] for m in METRICS} for system in systems},
        "settings": {s.label: s.params() for s in settings},
        "best_hybrid": best,
        "lexical_vs_bm25": (
            {m: overall["lexical"][m] - overall["bm25"][m] for m in METRICS}
            if "lexical" in overall
            else None
        ),
        "counts": dict(counts),
        "errors": dict(errors),
        "seconds": took,
        "timing": dict(timing),
    }
    params = {
        "data": os.path.abspath(args.data),
        "modes": modes,
        "limit": LIMIT,
        "limit_convs": args.limit_convs,
        "weights": args.weights,
        "min_score": args.min_score,
        "context": args.context,
        "dates": args.dates,
        "categories": sorted(categories),
        "layouts": args.layouts,
    }
    out_dir, file_name = os.path.split(os.path.abspath(args.json))
    common.write_result(NAME, out_dir, params, rows, summary, file_name=file_name)
    return 0


def report_counts(counts: Counter[str], errors: Counter[str], asked: int) -> None:
    print(f"\n{asked:,} questions asked")
    for key, n in sorted(counts.items()):
        print(f"  {key}: {n}")
    for key, n in sorted(errors.items()):
        print(f"  search errors, {key}: {n} (counted as no hits)")


if __name__ == "__main__":
    sys.exit(main())
