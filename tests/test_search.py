"""Search (Q1-Q3, F4, P3, G4): one question over every tier of a real store on disk, the
index following hand edits, natural-language and FTS5 queries, semantic and hybrid search
with a deterministic fake of the model (and with the real one), and the tool layer."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbrows import rows as db_rows
from memdir import Hit, Memory, MissingExtraError, QueryError, ValidationError
from memdir.clock import iso
from memdir.extras import command_for, install_command
from memdir.query import is_structured
from memdir.storage import embeddings
from memdir.testing import FixedClock, HashEmbedder, cli_env
from memdir.tools import call_tool
from storeconfig import write_config

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
DAY = 86_400
needs_model = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")


class CountingEmbedder(HashEmbedder):
    """The fake model, counting what it is asked to embed (not a fake of our storage)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return super().embed(texts)

    def take(self, *queries: str) -> list[str]:
        """What was embedded since the last call, the search queries left out."""
        done, self.texts = self.texts, []
        return [t for t in done if t not in queries]


def file_lines(mem: Memory, rel: str) -> list[str]:
    return Path(mem.path, rel).read_text(encoding="utf-8").split("\n")


def assert_lines_hold(mem: Memory, hit: Hit, text: str) -> None:
    """The hit's line range is the lines of its file that hold `text`, no blank edges."""
    assert hit.path is not None and hit.lines is not None
    start, end = hit.lines
    lines = file_lines(mem, hit.path)
    assert 1 <= start <= end <= len(lines), (hit, len(lines))
    assert text in "\n".join(lines[start - 1 : end]), (hit, lines)
    assert lines[start - 1].strip() and lines[end - 1].strip(), (hit, lines)


def bump_mtime(path: Path, seconds: float = 5.0) -> None:
    info = path.stat()
    later = info.st_mtime_ns + int(seconds * 1e9)
    os.utime(path, ns=(later, later))


def by_kind(hits: list[Hit]) -> dict[str, Hit]:
    found: dict[str, Hit] = {}
    for hit in hits:
        found.setdefault(hit.kind, hit)
    return found


def vector_rows(mem: Memory) -> list[tuple[str, str, int, int]]:
    """(model, owner, owner id, blob length) of every stored vector, read from memory.db."""
    sql = "SELECT model, owner, owner_id, length(vec) FROM vectors ORDER BY owner, owner_id"
    return db_rows(mem.store, sql)  # type: ignore[return-value]


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(time.time() - 10 * DAY)  # ten days ago; files written now are newer


@pytest.fixture
def tiers(state_dir: Path, clock: FixedClock) -> Iterator[Memory]:
    """A store with the same question answerable in every tier."""
    with Memory(clock=clock) as mem:
        mem.add_fact("Staging deploys use the blue-green switch", "convention")
        mem.add_fact("We picked the blue-green switch over canaries", "decision")
        mem.write_procedure(
            "deploy-staging",
            "---\ndescription: how to ship to staging\n---\n# Deploy staging\n\n"
            "1. build the image\n2. flip the blue-green switch\n3. watch the dashboards\n",
        )
        mem.write_entry(
            "release-process",
            "how releases go",
            "## Rollout\n\nThe blue-green switch flips at noon.\n\n"
            "## Freeze\n\nNo merges on Friday.\n",
        )
        mem.add_note("fix-42", "Rolled back the blue-green switch after the 502s")
        mem.add_note("fix-42", "Root cause is the health check path")
        mem.daily_append("Tested the blue-green switch on staging")
        yield mem


# -- Q1: one question, every tier --------------------------------------------------------


def test_one_question_finds_every_tier(tiers: Memory) -> None:  # Q1
    hits = tiers.search("blue-green switch", mode="lexical")
    found = by_kind(hits)
    assert set(found) == {"fact", "procedure", "global", "task", "daily"}
    for hit in hits:
        assert isinstance(hit.score, float) and hit.score > 0
        assert hit.date is not None and ISO.match(hit.date), hit
        assert "blue-green switch" in hit.content.lower()

    fact = found["fact"]
    assert fact.id is not None and fact.path is None and fact.lines is None
    assert fact.category in ("convention", "decision")
    assert tiers.get_fact(fact.id).content == fact.content

    for kind, folder in (
        ("procedure", "procedures"),
        ("global", "global"),
        ("task", "tasks"),
        ("daily", "daily"),
    ):
        hit = found[kind]
        assert hit.id is None and hit.path is not None and hit.path.startswith(folder + "/")
        assert_lines_hold(tiers, hit, "blue-green switch")
    assert found["task"].lines == (1, 1)  # one note, one line: not the notes after it
    [last] = tiers.search("health check", kinds=["task"], mode="lexical")
    assert last.lines == (2, 2)  # the file's last note: not the empty line after it
    assert_lines_hold(tiers, last, "health check path")
    assert found["global"].name == "release-process"
    assert "No merges" not in found["global"].content  # its own section only


def test_kinds_filter_the_tiers(tiers: Memory) -> None:  # Q1
    hits = tiers.search("blue-green switch", kinds=["task", "daily"], mode="lexical")
    assert {h.kind for h in hits} == {"task", "daily"}
    hits = tiers.search("blue-green switch", kinds="fact,global", mode="lexical")
    assert {h.kind for h in hits} == {"fact", "global"}
    assert [h.kind for h in tiers.search("switch", kinds=["procedure"], mode="lexical")] == [
        "procedure"  # found as a chunk and by substring (P3), listed once
    ]
    for bad in (["facts"], [], "nope"):
        with pytest.raises(ValidationError, match="bad kind"):
            tiers.search("switch", kinds=bad, mode="lexical")


def test_category_restricts_to_facts_of_it(tiers: Memory) -> None:  # Q1 F4
    hits = tiers.search("blue-green switch", category="decision", mode="lexical")
    assert [(h.kind, h.category) for h in hits] == [("fact", "decision")]
    with pytest.raises(ValidationError):
        tiers.search("switch", category="gossip", mode="lexical")


def test_since_filters_every_tier_by_date(tiers: Memory, clock: FixedClock) -> None:  # Q1 F4
    old_entry = Path(tiers.path, "global", "release-process.md")
    old = time.time() - 9 * DAY
    os.utime(old_entry, (old, old))  # written nine days ago, as far as the files say
    clock.advance(5 * DAY)  # five days ago
    tiers.add_fact("The blue-green switch now has a dry-run mode", "learning")
    tiers.add_note("fix-43", "Added a dry-run to the blue-green switch")
    tiers.daily_append("Demoed the blue-green switch dry-run")
    tiers.write_entry("switch-faq", "questions about the switch", "Is the blue-green switch safe?")

    since = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 7 * DAY))
    hits = tiers.search("blue-green switch", since=since, limit=50, mode="lexical")
    assert hits and all(h.date is not None and h.date >= since for h in hits)
    assert {h.kind for h in hits} == {"fact", "procedure", "global", "task", "daily"}
    assert [h.content for h in hits if h.kind == "fact"] == [
        "The blue-green switch now has a dry-run mode"
    ]
    assert [h.path for h in hits if h.kind == "global"] == ["global/switch-faq.md"]
    assert all("dry-run" in h.content for h in hits if h.kind in ("task", "daily"))
    everything = tiers.search("blue-green switch", limit=50, mode="lexical")
    assert len(everything) > len(hits)
    assert tiers.search("blue-green switch", since="2999-01-01", mode="lexical") == []
    with pytest.raises(ValidationError, match="bad date"):
        tiers.search("switch", since="last tuesday", mode="lexical")


def test_limit(tiers: Memory) -> None:  # Q1 F4
    assert len(tiers.search("blue-green switch", mode="lexical")) >= 5
    assert len(tiers.search("blue-green switch", limit=2, mode="lexical")) == 2
    for bad in (0, -1, 1001, True, "3"):
        with pytest.raises(ValidationError, match="bad limit"):
            tiers.search("switch", limit=bad, mode="lexical")  # type: ignore[arg-type]


# -- Q3, G4: the index follows the files -------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "text", "kind", "lines"),
    [
        (
            "global/hand-made.md",
            "# Tyres\n\nThe van needs winter tyres in November.\n",
            "global",
            (1, 3),
        ),
        (
            "daily/2026-01-15.md",
            "# 2026-01-15\n\n## 09:30\nBought winter tyres for the van\n",
            "daily",
            (3, 4),
        ),
    ],
)
def test_a_hand_written_file_is_found_at_the_next_search(
    memory: Memory, rel: str, text: str, kind: str, lines: tuple[int, int]
) -> None:  # G4 Q3
    assert memory.search("tyres", mode="lexical") == []
    path = Path(memory.path, rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    [hit] = memory.search("winter tyres", mode="lexical")
    assert (hit.kind, hit.path, hit.lines) == (kind, rel, lines)
    assert_lines_hold(memory, hit, "tyres")
    if kind == "daily":
        assert hit.date is not None and hit.date.startswith("2026-01-1")  # the log's own day


def test_a_hand_edit_of_the_same_size_is_picked_up(memory: Memory) -> None:  # G4 Q3
    memory.write_entry("pets", "the household", "The cat is called Tabby.\n")
    assert [h.name for h in memory.search("Tabby", mode="lexical")] == ["pets"]
    path = Path(memory.path, "global", "pets.md")
    before = path.read_text(encoding="utf-8")
    after = before.replace("Tabby", "Mochi")
    assert len(after.encode()) == len(before.encode())
    path.write_text(after, encoding="utf-8")
    bump_mtime(path)  # a same-size edit may land in the same mtime tick: make it visible
    assert memory.search("Tabby", mode="lexical") == []
    [hit] = memory.search("Mochi", mode="lexical")
    assert hit.content.endswith("The cat is called Mochi.")
    assert_lines_hold(memory, hit, "Mochi")


def test_a_touched_file_keeps_its_chunks_and_vectors_dated_anew(
    memory: Memory,
) -> None:  # G4 Q3 Q2: a touch is no edit: nothing to embed again, but its date moves
    memory.write_entry("pets", "the household", "## Cat\n\nTabby.\n\n## Dog\n\nRex.\n")
    first = memory.search("tabby OR rex", mode="lexical")
    chunks, vecs = (
        "SELECT content, hash FROM chunks ORDER BY id",
        "SELECT hash, vec FROM vectors ORDER BY hash",
    )
    texts, vectors = db_rows(memory.store, chunks), db_rows(memory.store, vecs)
    path = Path(memory.path, "global", "pets.md")
    old = time.time() - 9 * DAY
    os.utime(path, (old, old))
    again = memory.search("tabby OR rex", mode="lexical")
    assert [h.content for h in again] == [h.content for h in first]
    assert {h.date for h in again} == {iso(path.stat().st_mtime_ns / 1e9)}
    assert db_rows(memory.store, chunks) == texts and db_rows(memory.store, vecs) == vectors


def test_a_deleted_file_leaves_the_index(tiers: Memory) -> None:  # G4 Q3
    kinds = {h.kind for h in tiers.search("blue-green switch", mode="lexical")}
    assert {"global", "task", "procedure"} <= kinds
    for rel in ("global/release-process.md", "tasks/fix-42.md", "procedures/deploy-staging.md"):
        Path(tiers.path, rel).unlink()
    kinds = {h.kind for h in tiers.search("blue-green switch", mode="lexical")}
    assert kinds == {"fact", "daily"}


def test_sections_are_chunks_with_their_own_lines(memory: Memory) -> None:  # Q3
    memory.write_entry(
        "house",
        "the house",
        "Intro about the house.\n\n## Kitchen\n\nThe oven is gas.\n\n"
        "## Garden\n\nThe apple tree needs pruning.\nIn March.\n\n## Garage\n\nBikes.\n",
    )
    ranges: dict[str, tuple[int, int]] = {}
    for word, text in (
        ("oven", "oven"),
        ("apple", "apple"),
        ("bikes", "Bikes"),
        ("intro", "Intro"),
    ):
        [hit] = memory.search(word, mode="lexical")
        assert hit.kind == "global" and hit.name == "house"
        assert_lines_hold(memory, hit, text)
        assert hit.lines is not None
        ranges[word] = hit.lines
    assert len(set(ranges.values())) == 4
    spans = sorted(ranges.values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))  # disjoint
    assert ranges["apple"][1] - ranges["apple"][0] == 3  # heading, blank, two lines


def test_reindex_rebuilds_the_index(memory: Memory) -> None:  # Q3 G3
    memory.write_entry("pets", "the household", "The cat is called Tabby.\n")
    memory.add_note("t-1", "Tabby was at the vet")
    assert len(memory.search("tabby", mode="lexical")) == 2
    db_rows(memory.store, "DELETE FROM chunks")  # the index is lost; the files are intact
    assert memory.search("tabby", mode="lexical") == []
    Path(memory.path, "MEMORY.md").unlink()
    done = memory.reindex()
    assert done.files == 2 and [e.name for e in done.entries] == ["pets"]
    assert done.embedded >= 0
    assert {h.kind for h in memory.search("tabby", mode="lexical")} == {"global", "task"}
    assert "pets" in Path(memory.path, "MEMORY.md").read_text(encoding="utf-8")


# -- Q2, F4: what a query means -----------------------------------------------------------


@pytest.fixture
def facts_store(memory: Memory) -> Memory:
    memory.add_fact("We deployed the billing service on Friday", "decision")
    memory.add_fact("The cache uses redis", "decision")
    memory.add_fact("Our office is in Lisbon", "learning")
    memory.add_fact("Привет мир is the greeting used in Kyiv standups", "convention")
    memory.add_fact("The team lunch spot is Café Noël in 東京", "learning")
    return memory


def contents(hits: list[Hit]) -> list[str]:
    return [h.content for h in hits]


def test_a_plain_question_works(facts_store: Memory) -> None:  # Q2
    ask = facts_store.search
    hits = ask("When was the billing service deployed?", mode="lexical")
    assert contents(hits) == ["We deployed the billing service on Friday"]
    # stopwords are dropped: "is", "in" and "the" would otherwise match the office
    assert contents(ask("What is in the cache?", mode="lexical")) == ["The cache uses redis"]
    # the words are OR-ed: neither fact holds both
    assert set(contents(ask("redis lisbon", mode="lexical"))) == {
        "The cache uses redis",
        "Our office is in Lisbon",
    }
    # stemming: deploying finds deployed
    assert contents(ask("deploying", mode="lexical")) == [
        "We deployed the billing service on Friday"
    ]
    assert len(ask("привет", mode="lexical")) == 1  # case folding beyond ASCII
    assert len(ask("cafe noel", mode="lexical")) == 1  # diacritics folded
    assert len(ask("東京", mode="lexical")) == 1


def test_fts5_operators_keep_their_meaning(facts_store: Memory) -> None:  # F4 Q2
    ask = facts_store.search
    assert ask("billing NOT friday", mode="lexical") == []
    assert len(ask("billing NOT redis", mode="lexical")) == 1
    assert len(ask('"billing service"', mode="lexical")) == 1
    assert ask('"service billing"', mode="lexical") == []  # a phrase is exact
    assert ask("redis AND lisbon", mode="lexical") == []
    assert len(ask("redis OR lisbon", mode="lexical")) == 2
    assert len(ask("bill*", mode="lexical")) == 1
    assert len(ask("(redis OR lisbon) NOT office", mode="lexical")) == 1
    for bad in ('"unclosed', "billing AND", "(redis", "NOT"):
        with pytest.raises(QueryError) as exc:
            ask(bad, mode="lexical")
        assert "\n" not in str(exc.value) and "sqlite" not in str(exc.value).lower()


@pytest.mark.parametrize(
    "query",
    [
        "deploy-staging",
        "what's the user's name?",
        "don't",
        'the "billing" service',
        "key:value",
        "billing: when?",
        "🎉 billing 🎉",
        "🎉",
        "東京の天気",
        "Привет, мир!",
        "naïve café",
        "C++ / C#",
        "50% off!",
        "a -- b",
        "'",
        "?!",
        "-",
        ":",
        "*",
        "^billing",
        "billing NEAR cache",
        "col:billing",
        "",
        "   ",
        "\t\n",
        "\0",
        "a\0b",
    ],
)
def test_punctuation_and_scripts_never_raise(facts_store: Memory, query: str) -> None:  # Q2
    hits = facts_store.search(query, mode="lexical")
    assert isinstance(hits, list)
    if not query.strip() or not any(ch.isalnum() for ch in query):
        assert hits == []
    if "billing" in query and "NEAR" not in query:
        assert "We deployed the billing service on Friday" in contents(hits)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=40))
def test_any_text_searches_or_is_a_clear_query_error(
    facts_store: Memory, text: str
) -> None:  # Q2 F4
    try:
        hits = facts_store.search(text, mode="lexical")
    except QueryError as exc:
        # only a query written in FTS5 syntax can be malformed (an unclosed quote, a
        # dangling AND); a plain question never is
        assert is_structured(text), text
        assert "\n" not in str(exc)
        return
    assert isinstance(hits, list)
    if not text.strip():
        assert hits == []


# -- Q2, Q3: semantic and hybrid search with a deterministic fake of the model -----------

# HashEmbedder is a bag of words: texts sharing words are close. Lexical search drops
# stopwords, so a fact that shares only stopwords with the question is found by
# similarity alone.
QUESTION = "they were there when it was zanzibar"
ONLY_SIMILAR = "they were there when it was"  # shares stopwords only
BOTH = "zanzibar: they were there when it was hot"
ONLY_LEXICAL = "zanzibar spice market prices rose sharply this season"


@pytest.fixture
def embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def sem(state_dir: Path, embedder: CountingEmbedder) -> Iterator[Memory]:
    with Memory(embedder=embedder) as mem:
        yield mem


def test_semantic_finds_what_lexical_misses(sem: Memory) -> None:  # Q2
    sem.add_fact(ONLY_SIMILAR, "learning")
    sem.add_fact("Invoices go out on the first of the month", "convention")
    assert sem.search(QUESTION, mode="lexical") == []
    hits = sem.search(QUESTION, mode="semantic")
    assert contents(hits) == [ONLY_SIMILAR]  # the unrelated fact is below min_score
    assert 0.5 <= hits[0].score <= 1.0 and hits[0].id is not None
    assert hits[0].category == "learning" and hits[0].date is not None


def test_semantic_search_covers_the_files_and_their_filters(sem: Memory) -> None:  # Q2 Q1
    sem.write_entry("trip", "a trip", f"## Trip\n\n{ONLY_SIMILAR}\n")
    sem.add_note("t-1", ONLY_SIMILAR)
    sem.add_fact(ONLY_SIMILAR, "learning")
    assert {h.kind for h in sem.search(QUESTION, mode="semantic")} == {"fact", "global", "task"}
    hits = sem.search(QUESTION, mode="semantic", kinds=["task"])
    assert [h.kind for h in hits] == ["task"]
    assert_lines_hold(sem, hits[0], ONLY_SIMILAR)
    assert [h.kind for h in sem.search(QUESTION, mode="semantic", category="learning")] == ["fact"]
    assert sem.search(QUESTION, mode="semantic", since="2999-01-01") == []


def test_min_score_drops_weak_hits(sem: Memory) -> None:  # Q2
    sem.add_fact("alpha beta gamma delta", "learning")
    sem.add_fact("alpha beta gamma epsilon", "learning")
    sem.add_fact("zeta eta theta iota", "learning")
    assert len(sem.search("alpha beta gamma delta", mode="semantic")) == 2  # default 0.5
    near = sem.search("alpha beta gamma delta", mode="semantic", min_score=0.99)
    assert contents(near) == ["alpha beta gamma delta"]
    everything = sem.search("alpha beta gamma delta", mode="semantic", min_score=-1.0)
    assert len(everything) == 3
    scores = [h.score for h in everything]
    assert scores == sorted(scores, reverse=True)
    with pytest.raises(ValidationError, match="min_score"):
        sem.search("alpha", mode="semantic", min_score="high")  # type: ignore[arg-type]


def test_vectors_are_float32_blobs_in_memory_db(sem: Memory) -> None:  # Q2
    import numpy as np

    fact = sem.add_fact("alpha beta gamma", "learning")
    sem.write_entry("greek", "letters", "## One\n\nalpha\n\n## Two\n\nbeta\n")
    sem.search("alpha", mode="semantic")
    rows = vector_rows(sem)
    assert [r[1] for r in rows].count("fact") == 1
    assert [r[1] for r in rows].count("chunk") == 2
    assert {(model, length) for model, _, _, length in rows} == {("hash-embedder", 4 * 64)}
    ((blob,),) = db_rows(
        sem.store, "SELECT vec FROM vectors WHERE owner = 'fact' AND owner_id = ?", (fact.id,)
    )
    stored = np.frombuffer(blob, dtype="<f4")
    assert np.allclose(stored, HashEmbedder().embed([fact.content])[0])
    assert abs(float(np.linalg.norm(stored)) - 1.0) < 1e-5


def test_unchanged_text_is_not_embedded_again(
    sem: Memory, embedder: CountingEmbedder
) -> None:  # Q2
    sem.add_fact("alpha beta gamma", "learning")
    sem.write_entry("greek", "letters", "## One\n\nalpha one\n\n## Two\n\nbeta two\n")
    # the model is loaded, so each write embedded what it made: the fact (once, shared with
    # the duplicate guard) and the entry's two sections (the guard also embedded its body)
    written = embedder.take()
    assert written.count("alpha beta gamma") == 1
    assert [t for t in written if t.startswith(("greek", "## Two"))] == [
        "greek — letters\n## One\n\nalpha one",
        "## Two\n\nbeta two",
    ]
    sem.search("alpha", mode="semantic")
    sem.search("alpha", mode="hybrid")
    assert embedder.take("alpha") == []  # a search embeds its question only (Q2)
    assert len(vector_rows(sem)) == 3

    path = Path(sem.path, "global", "greek.md")
    path.write_text(path.read_text(encoding="utf-8").replace("beta two", "beta 2"), "utf-8")
    bump_mtime(path)
    sem.search("alpha", mode="semantic")
    assert embedder.take("alpha") == []  # the hand edit waits for reindex
    assert sem.search_notice() is not None and "1 item is not embedded" in sem.search_notice()
    assert sem.reindex().embedded == 1
    assert embedder.take() == ["## Two\n\nbeta 2"]  # the other section kept its vector

    bump_mtime(path)
    sem.search("alpha", mode="semantic")
    assert embedder.take("alpha") == []
    done = sem.reindex()
    assert done.embedded == 0 and embedder.take() == []

    sem.add_fact("delta epsilon", "learning")
    assert embedder.take() == ["delta epsilon"]
    sem.search("alpha", mode="semantic")
    assert embedder.take("alpha") == []
    assert len(vector_rows(sem)) == 4


def test_a_superseded_or_removed_fact_loses_its_vector(sem: Memory) -> None:  # Q2 F3
    old = sem.add_fact("alpha beta gamma delta", "learning")
    other = sem.add_fact("zeta eta theta", "learning")
    sem.search("alpha", mode="semantic")
    assert [r[2] for r in vector_rows(sem)] == [old.id, other.id]
    new = sem.supersede_fact(old.id, "alpha beta gamma epsilon")
    # the old vector is gone; the new text was embedded by the duplicate guard's check
    assert sorted(r[2] for r in vector_rows(sem)) == sorted([other.id, new.id])
    hits = sem.search("alpha beta gamma delta", mode="semantic")
    assert [h.id for h in hits] == [new.id]
    assert sorted(r[2] for r in vector_rows(sem)) == sorted([other.id, new.id])
    sem.remove_fact(other.id)
    assert [r[2] for r in vector_rows(sem)] == [new.id]


def test_hybrid_is_the_union_ranked_by_fusion(sem: Memory) -> None:  # Q3
    for text in (ONLY_SIMILAR, BOTH, ONLY_LEXICAL):
        sem.add_fact(text, "learning")
    lexical_hits = sem.search(QUESTION, mode="lexical")
    lexical = contents(lexical_hits)
    semantic = contents(sem.search(QUESTION, mode="semantic"))
    assert set(lexical) == {BOTH, ONLY_LEXICAL} and set(semantic) == {BOTH, ONLY_SIMILAR}
    hits = sem.search(QUESTION, mode="hybrid")
    # in both lists first; then the lexical one (weight 1.0) before the semantic (0.3)
    assert contents(hits) == [BOTH, ONLY_LEXICAL, ONLY_SIMILAR]
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3
    # weighted sum: lexical_weight * bm25 / the best bm25 + semantic_weight * cosine, the
    # cosine counted for every candidate (ONLY_LEXICAL's is below min_score, yet it counts)
    conf = sem.settings
    bm25 = {h.content: h.score for h in lexical_hits}
    for hit in hits:
        cosine = float(HashEmbedder().embed([hit.content])[0] @ HashEmbedder().embed([QUESTION])[0])
        fused = conf.search_lexical_weight * bm25.get(hit.content, 0.0) / max(
            bm25.values()
        ) + conf.search_semantic_weight * max(cosine, 0.0)
        assert hit.score == pytest.approx(fused, abs=1e-5)
    assert sem.search_mode() == "hybrid"  # the default with an embedder
    assert contents(sem.search(QUESTION)) == contents(hits)


def test_a_structured_query_in_hybrid_stays_lexical(sem: Memory) -> None:  # Q3 F4
    for text in (ONLY_SIMILAR, BOTH, ONLY_LEXICAL):
        sem.add_fact(text, "learning")
    structured = QUESTION.replace("zanzibar", "zanzibar*")  # all the words, AND-ed
    assert ONLY_SIMILAR in contents(sem.search(structured, mode="semantic"))
    hybrid = sem.search(structured, mode="hybrid")
    assert hybrid == sem.search(structured, mode="lexical")
    assert contents(hybrid) == [BOTH]
    assert contents(sem.search("zanzibar NOT hot", mode="hybrid")) == [ONLY_LEXICAL]


# -- Q2, Q3 with the real model -------------------------------------------------------------

PET = "The user has a golden retriever named Max"
UNRELATED = (
    "The staging deploy runs on kube-west every Tuesday",
    "Prefer tabs over spaces in Go files",
    "We chose PostgreSQL over MySQL for the billing service",
)


@pytest.fixture
def pets(memory: Memory) -> Memory:
    memory.add_fact(PET, "learning")
    for text in UNRELATED:
        memory.add_fact(text, "decision")
    if embeddings.available():  # each small write embedded what it wrote (Q2)
        assert memory.embed_pending() == 0
        assert memory.store.count_unembedded(embeddings.DEFAULT_MODEL) == 0
    return memory


@pytest.mark.embeddings
@needs_model
def test_the_model_finds_a_paraphrase(pets: Memory) -> None:  # Q2
    hits = pets.search("What pet does the user have?", mode="semantic")
    assert contents(hits)[0] == PET
    assert not set(contents(hits)) & set(UNRELATED)  # below the default min_score 0.5
    # no content word in common at all: only the model can tell
    question = "What pet do they have?"
    assert pets.search(question, mode="lexical") == []
    hits = pets.search(question, mode="semantic", min_score=0.0)
    assert contents(hits)[0] == PET
    assert hits[0].score > max((h.score for h in hits[1:]), default=0.0) + 0.2


@pytest.mark.embeddings
@needs_model
def test_hybrid_is_the_default_with_the_extra(pets: Memory) -> None:  # Q3
    assert pets.search_mode() == "hybrid"
    assert contents(pets.search("What pet does the user have?"))[0] == PET
    assert pets.search_notice() is None


@pytest.mark.embeddings
@needs_model
def test_cli_semantic_search(pets: Memory, run: Callable[..., Any]) -> None:  # Q2 C
    result = run("search", "--mode", "semantic", "What pet does the user have?", "--json")
    assert result.code == 0, result.err
    hits = result.json()
    assert hits[0]["kind"] == "fact" and hits[0]["content"] == PET
    assert hits[0]["score"] >= 0.5 and isinstance(hits[0]["id"], int)
    # calibrated (Q2): a cosine of 1.0 is s = 3.6 for MiniLM, so no hit reaches 4
    result = run("search", "--mode", "semantic", "--min-score", "4", "What pet?", "--json")
    assert (result.code, result.json()) == (0, [])


@pytest.mark.embeddings
@needs_model
def test_cli_reindex_reports_counts(pets: Memory, run: Callable[..., Any]) -> None:  # Q3 C
    with Memory() as cli_like, cli_like.bulk():  # as an import writes: vectors wait
        cli_like.write_entry(
            "dog", "the dog", "## Walks\n\nMax walks at seven.\n\n## Food\n\nKibble.\n"
        )
    result = run("reindex", "--json")
    assert result.code == 0, result.err
    assert result.json() == {"entries": 1, "files": 1, "embedded": 2, "dropped": 0, "broken": []}
    result = run("reindex")
    assert result.code == 0, result.err
    assert "1 entries" in result.out and "1 files, 0 items embedded" in result.out


# -- Q2 without the extra ------------------------------------------------------------------


def test_without_the_extra_search_is_lexical_and_says_so(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:  # Q2
    monkeypatch.setattr(embeddings, "available", lambda: False)  # the package is missing
    memory.add_fact("kiwi harvest is in March", "learning")
    assert memory.search_mode() == "lexical"
    command = install_command("embeddings")  # the command for where memdir is installed
    for mode in ("semantic", "hybrid"):
        with pytest.raises(MissingExtraError, match=re.escape(command)):
            memory.search("kiwi", mode=mode)
    assert contents(memory.search("kiwi")) == ["kiwi harvest is in March"]
    notice = memory.search_notice()
    assert notice is not None and "lexical" in notice and notice.endswith(command)
    assert memory.search_notice() is None
    with Memory() as again:  # once per store, not per process
        assert again.search_notice() is None
    assert memory.reindex().embedded == 0


def test_the_tool_says_so_once(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:  # Q2 A3
    monkeypatch.setattr(embeddings, "available", lambda: False)
    first = call_tool(memory, "memory_search", {"query": "kiwi"})
    assert install_command("embeddings") in first["note"]
    assert "note" not in call_tool(memory, "memory_search", {"query": "kiwi"})


# A CLI process whose embeddings extra is missing: the real CLI, in a real process, with
# the extra's check answering "not installed" (uninstalling packages is not a test's job).
WITHOUT_EXTRA = (
    "import sys; from memdir.storage import embeddings; embeddings.available = lambda: False; "
    "from memdir.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_the_lexical_only_notice_is_shown_once_across_cli_calls(
    state_dir: Path,
) -> None:  # Q2 C
    env = cli_env(str(state_dir))
    with Memory() as mem:
        mem.add_fact("kiwi harvest is in March", "learning")
    errs = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-c", WITHOUT_EXTRA, "search", "kiwi"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "kiwi harvest is in March" in proc.stdout
        errs.append(proc.stderr)
    assert errs[1:] == ["", ""]
    assert errs[0].startswith("memdir: warning: search is lexical only")
    assert errs[0].strip().endswith(install_command("embeddings"))


def test_the_install_command_follows_where_memdir_was_installed(tmp_path: Path) -> None:
    """Q2, C: the notice names a command that works from this install."""
    py = "/opt/env/bin/python"
    editable = json.dumps({"url": "file:///home/ada/src/memdir", "dir_info": {"editable": True}})
    plain_dir = json.dumps({"url": "file:///home/ada/src/memdir", "dir_info": {}})
    git = json.dumps(
        {
            "url": "https://github.com/ada/memdir.git",
            "vcs_info": {"vcs": "git", "commit_id": "abc123"},
        }
    )

    def prefix(*marks: str, cfg: str = "home = /usr/bin\n") -> str:
        folder = tmp_path / f"p{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / "pyvenv.cfg").write_text(cfg, "utf-8")
        for mark in marks:
            (folder / mark).write_text("{}", "utf-8")
        return str(folder)

    venv = prefix()
    assert command_for("embeddings", venv, py, None, True) == (
        "/opt/env/bin/python -m pip install 'memdir[embeddings]'"
    )
    assert command_for("embeddings", venv, py, editable, True) == (
        "cd /home/ada/src/memdir && /opt/env/bin/python -m pip install -e '.[embeddings]'"
    )
    assert command_for("embeddings", venv, py, plain_dir, True) == (
        "/opt/env/bin/python -m pip install 'memdir[embeddings] @ file:///home/ada/src/memdir'"
    )
    assert command_for("embeddings", venv, py, git, True) == (
        "/opt/env/bin/python -m pip install "
        "'memdir[embeddings] @ git+https://github.com/ada/memdir.git@abc123'"
    )
    uv_venv = prefix(cfg="home = /usr/bin\nuv = 0.5.1\n")
    assert command_for("embeddings", uv_venv, py, None, False) == (
        "uv pip install --python /opt/env/bin/python 'memdir[embeddings]'"
    )
    assert command_for("embeddings", uv_venv, py, None, True) == (
        "/opt/env/bin/python -m pip install 'memdir[embeddings]'"
    )
    pipx = prefix("pipx_metadata.json")
    assert command_for("embeddings", pipx, py, None, True) == (
        "pipx install --force 'memdir[embeddings]'"
    )
    assert command_for("embeddings", pipx, py, editable, True) == (
        "pipx install --force -e '/home/ada/src/memdir[embeddings]'"
    )
    uv_tool = prefix("uv-receipt.toml")
    assert command_for("embeddings", uv_tool, py, None, False) == (
        "uv tool install --force 'memdir[embeddings]'"
    )
    # this very install: an editable checkout in a venv with pip
    here = install_command("embeddings")
    assert "-m pip install -e '.[embeddings]'" in here
    assert here.startswith(f"cd {Path(__file__).resolve().parents[1]} && ")


# -- lexical scores: readable in any store (Q1) ---------------------------------------------


def test_lexical_scores_are_readable_in_a_small_store(
    memory: Memory, run: Callable[..., Any]
) -> None:  # Q1 F4
    """bm25 in a store of one to three items is ~1e-6 (FTS5 floors a word's idf there):
    a score is the hit's share of the best match of its kind, 1.0 for the best."""

    def readable(hits: list[Hit]) -> bool:
        scores = [h.score for h in hits]
        return (
            scores[0] == 1.0
            and all(0.0001 <= s <= 1.0 and round(s, 4) == s for s in scores)
            and scores == sorted(scores, reverse=True)
        )

    first = memory.add_fact("kiwi vines need a male plant", "learning")
    for n in (1, 2, 3):
        hits = memory.search("kiwi male plant", mode="lexical")
        assert readable(hits) and len(hits) == n, hits
        if n == 2:  # every word's idf is at FTS5's floor here: the share counts words, 2 of 3
            assert [h.score for h in hits] == [1.0, pytest.approx(2 / 3, abs=1e-4)]
        if n < 3:
            memory.add_fact(f"kiwi plant number {n} fruits late", "learning")
    [only] = memory.search("male", mode="lexical")
    assert (only.id, only.score) == (first.id, 1.0)
    [then] = memory.search("male", as_of="2999-01-01")
    assert then.score == 1.0
    memory.write_procedure("kiwi-care", "# Kiwi care\n\nwater the male plant weekly\n")
    hits = memory.search("male plant", mode="lexical")
    assert {h.kind for h in hits} == {"fact", "procedure"} and readable(hits), hits
    result = run("search", "male plant", "--mode", "lexical")
    assert result.code == 0 and "score 1\n" in result.out and "e-0" not in result.out


# -- A1, A3: the tool layer ----------------------------------------------------------------


def test_memory_search_tool(tiers: Memory) -> None:  # Q1 A1 A3
    result = call_tool(
        tiers, "memory_search", {"query": "blue-green switch", "kinds": ["task"], "mode": "lexical"}
    )
    json.dumps(result)
    [hit] = result["hits"]
    assert hit["kind"] == "task" and hit["path"] == "tasks/fix-42.md" and hit["lines"] == [1, 1]
    assert "blue-green switch" in hit["content"] and hit["score"] > 0 and ISO.match(hit["date"])
    result = call_tool(
        tiers,
        "memory_search",
        {"query": "switch", "category": "decision", "limit": 5, "mode": "lexical"},
    )
    assert [h["kind"] for h in result["hits"]] == ["fact"]
    with pytest.raises(ValidationError):
        call_tool(tiers, "memory_search", {"query": "switch", "kinds": ["gossip"]})
    with pytest.raises(ValidationError):
        call_tool(tiers, "memory_search", {"query": "switch", "mode": "fuzzy"})


def test_cli_search_json(tiers: Memory, run: Callable[..., Any]) -> None:  # Q1 C
    result = run(
        "search",
        "blue-green switch",
        "--kind",
        "task",
        "--kind",
        "daily",
        "--mode",
        "lexical",
        "--json",
    )
    assert result.code == 0, result.err
    hits = result.json()
    assert {h["kind"] for h in hits} == {"task", "daily"}
    assert all("path" in h and "score" in h and "content" in h for h in hits)
    result = run("search", '"unclosed', "--mode", "lexical")
    assert result.code == 1 and "Traceback" not in result.err
    assert len(result.err.strip().splitlines()) == 1 and "unclosed" in result.err


# -- L3, Z: a locked database ---------------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.mark.sqlite_only
def test_search_answers_while_the_database_is_locked(
    state_dir: Path, run: Callable[..., Any]
) -> None:  # Q1 L3 Z
    write_config(state_dir, "[memory]\nbusy_timeout_ms = 200\n")
    with Memory(embedder=HashEmbedder()) as mem:
        mem.add_fact("kiwi harvest is in March", "learning")
        assert len(mem.search("kiwi", mode="lexical")) == 1
        with Memory() as writer:  # no model loaded there: the fact is not embedded yet
            writer.add_fact("kiwi vines like shade", "learning")
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, mem.layout.db],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
            new = Path(mem.path, "global", "kiwi-notes.md")  # the index cannot take it now
            new.parent.mkdir(parents=True, exist_ok=True)
            new.write_text("# Kiwi\n\nkiwi needs a male plant\n", encoding="utf-8")
            started = time.monotonic()
            hits = mem.search("kiwi", mode="lexical")
            assert {h.kind for h in hits} == {"fact"} and len(hits) == 2
            hits = mem.search("kiwi", mode="hybrid")  # the vectors cannot be stored either
            assert {h.kind for h in hits} == {"fact"} and len(hits) == 2
            notice = mem.search_notice()
            assert notice is not None and "not embedded yet" in notice
            assert time.monotonic() - started < 5
            result = run("search", "kiwi", "--mode", "lexical", "--json")  # another process
            assert result.code == 0, result.err
            assert len(result.json()) == 2
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait(timeout=10)
            holder.stdout.close()  # type: ignore[union-attr]
        kinds = [h.kind for h in mem.search("kiwi", mode="hybrid")]
        assert sorted(kinds) == ["fact", "fact", "global"]
        assert "2 items are not embedded yet" in (mem.search_notice() or "")
        assert mem.embed_pending() == 2  # the other process's fact, the new file's section
        mem.search("kiwi", mode="hybrid")
        assert mem.search_notice() is None


def test_a_warm_memory_sees_facts_another_process_added(state_dir: Path) -> None:  # Q2, L3
    # the "nothing left to embed" answer is remembered only until the database changes
    warm = Memory(embedder=HashEmbedder())
    warm.add_fact("the office plant needs water on mondays", "learning")
    assert warm.search("office plant water", mode="semantic", min_score=0.3)
    assert warm.search("giraffe zebra savanna", mode="semantic", min_score=0.6) == []
    other = Memory(embedder=HashEmbedder())
    other.add_fact("giraffe zebra savanna trip planned", "learning")
    other.close()
    found = warm.search("giraffe zebra savanna", mode="semantic", min_score=0.6)
    assert [h.content for h in found] == ["giraffe zebra savanna trip planned"]


def test_a_search_of_some_kinds_syncs_only_their_files(memory: Memory) -> None:  # Q1 Q3 C
    """The index follows the files of the tiers a search looks at: a fact search reads no
    markdown file, and a global one indexes the global entry written by hand while a daily
    log written by hand waits for the search that looks at logs."""
    memory.add_fact("kiwi harvest is in March", "learning")
    root = Path(memory.path)
    (root / "global").mkdir(parents=True, exist_ok=True)
    (root / "daily").mkdir(parents=True, exist_ok=True)
    (root / "global" / "kiwi-notes.md").write_text(
        "---\ndescription: kiwi\n---\nkiwi vines need frost protection\n"
    )
    (root / "daily" / "2026-01-02.md").write_text("# 2026-01-02\n\n## 10:00\nkiwi tasting\n")
    assert [h.kind for h in memory.search("kiwi", kinds=["fact"], mode="lexical")] == ["fact"]
    assert memory.store.indexed_files() == {}
    found = memory.search("kiwi", kinds=["global"], mode="lexical")
    assert [h.kind for h in found] == ["global"]
    assert set(memory.store.indexed_files()) == {"global/kiwi-notes.md"}
    kinds = {h.kind for h in memory.search("kiwi", mode="lexical")}
    assert kinds == {"fact", "global", "daily"}
    assert set(memory.store.indexed_files()) == {"global/kiwi-notes.md", "daily/2026-01-02.md"}
    (root / "global" / "kiwi-notes.md").unlink()
    memory.search("kiwi", kinds=["daily"], mode="lexical")  # a gone entry is not its business
    assert "global/kiwi-notes.md" in memory.store.indexed_files()
    memory.search("kiwi", kinds=["global"], mode="lexical")
    assert set(memory.store.indexed_files()) == {"daily/2026-01-02.md"}
