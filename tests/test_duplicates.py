"""N1: the duplicate guard on every write path — facts, entries, procedures, markers,
the agent tools and the CLI — and its measures (similarity.py)."""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir import Memory, similarity
from memdir.errors import ConfigError, ConflictError
from memdir.query import STOPWORDS
from memdir.testing import HashEmbedder, cli_env
from memdir.tools import call_tool
from storeconfig import write_config

# -- the measures --------------------------------------------------------------------------


def test_normalize_sets_case_unicode_form_and_spacing_aside_only() -> None:  # X5
    normal = similarity.normalize("  The USER prefers: dark-mode!\n")
    assert normal == "the user prefers: dark-mode!"
    assert similarity.normalize("- **Bold** item (see C++).") == "- **bold** item (see c++)."
    assert similarity.text_key("Uses  TABS.") == similarity.text_key("uses tabs.")
    assert similarity.text_key("Uses tabs.") != similarity.text_key("uses   TABS")
    assert similarity.text_key("uses tabs") != similarity.text_key("uses spaces")
    # the near-duplicate measure still trims punctuation from word edges
    assert similarity.words("- **Bold** item (see C++).") == {"bold", "item", "see", "c++"}


def test_jaccard_of_content_words() -> None:
    a = similarity.words("The user prefers dark mode")
    b = similarity.words("User prefers dark mode in editors")
    assert a == {"user", "prefers", "dark", "mode"}
    assert similarity.jaccard(a, b) == pytest.approx(0.8)
    assert similarity.jaccard(a, frozenset()) == 0.0
    assert similarity.words("the a of") == {"the", "a", "of"}  # all stopwords: keep them


def test_band_keys_are_stable_and_the_vectorised_path_agrees() -> None:
    texts = [f"fact number {i} about caching sockets and timeouts {i * 7}" for i in range(50)]
    texts += ["", "the a"]
    bags = [similarity.words(t) for t in texts]
    one_by_one = [similarity.band_keys(bag) for bag in bags]
    assert similarity.band_keys_many(bags) == one_by_one
    assert one_by_one[-2] == [] and len(one_by_one[0]) == similarity.BANDS
    # keys live in memory.db: they must never change between versions or processes
    assert similarity.band_keys(frozenset({"alpha"}))[:3] == [
        -6187622115723882234,
        -5528412822449899855,
        702659968264601863,
    ]
    assert similarity.text_key("The user prefers dark mode") == 1536548463380911306
    assert all(-(1 << 63) <= k < (1 << 63) for k in one_by_one[0])


# -- facts -----------------------------------------------------------------------------------


def test_an_exact_duplicate_fact_is_not_stored_twice(memory: Memory) -> None:  # N1 F3 X5
    first = memory.add_fact("The user prefers dark mode.", "preference")
    again = memory.add_fact("  the USER   prefers DARK mode.\n", "decision")
    assert again.duplicate and again.id == first.id and again.content == first.content
    # X5: the hint is the library call that does it
    assert again.hint is not None
    assert f"`memory.supersede_fact({first.id}, '<new text>')`" in again.hint
    assert memory.stats().facts_active == 1


def test_a_superseded_fact_does_not_block_its_text(memory: Memory) -> None:  # N1 F3
    old = memory.add_fact("deploys on Fridays", "convention")
    memory.supersede_fact(old.id, "no deploys on Fridays")
    back = memory.add_fact("deploys on Fridays", "convention")  # only active facts count
    assert not back.duplicate and back.id != old.id


def test_a_near_duplicate_is_stored_and_named(memory: Memory) -> None:  # N1
    first = memory.add_fact("The user prefers dark mode", "preference")
    memory.add_fact("Deploy staging with make deploy", "convention")
    near = memory.add_fact("User prefers dark mode in editors", "preference")
    assert not near.duplicate and near.id != first.id
    assert [(s.kind, s.ref, s.how) for s in near.similar] == [("fact", first.id, "lexical")]
    assert near.similar[0].score == pytest.approx(0.8)
    assert near.hint is not None and f"fact {first.id}" in near.hint
    unrelated = memory.add_fact("CI takes twelve minutes on main", "learning")
    assert unrelated.similar == () and unrelated.hint is None


def test_the_near_threshold_is_a_setting(state_dir: Path) -> None:  # N1 S
    # semantic = 1.0: only the lexical threshold is under test (a write loads the model)
    write_config(state_dir, "[duplicates]\nlexical = 0.9\nsemantic = 1.0\n")
    with Memory() as mem:
        mem.add_fact("The user prefers dark mode", "preference")
        assert mem.add_fact("User prefers dark mode in editors", "preference").similar == ()
    write_config(state_dir, "[duplicates]\nlexical = 2\n")
    with pytest.raises(ConfigError, match="duplicates.lexical"):
        Memory()


def test_semantic_near_duplicates_when_the_model_is_loaded(state_dir: Path) -> None:  # N1 Q2
    with Memory(embedder=HashEmbedder()) as mem:
        first = mem.add_fact("kiwi " * 10 + "orchard", "learning")
        # Jaccard 1/3: not lexical; the hash embedder's cosine (word counts) is high
        near = mem.add_fact("kiwi " * 10 + "harvest", "learning")
        assert [(s.ref, s.how) for s in near.similar] == [(first.id, "semantic")]
        assert near.similar[0].score >= mem.settings.duplicate_semantic


def test_supersede_with_the_same_text_changes_nothing(memory: Memory) -> None:  # N1 F3
    fact = memory.add_fact("CI takes 12 minutes", "learning")
    same = memory.supersede_fact(fact.id, "CI takes 12 minutes")
    assert same.duplicate and same.id == fact.id and same.status == "active"
    assert len(memory.fact_history(fact.id)) == 1


def test_supersede_with_another_facts_text_is_refused(memory: Memory) -> None:  # N1 F3
    a = memory.add_fact("Python 3.11 everywhere", "decision")
    b = memory.add_fact("Python 3.12 everywhere", "decision")
    with pytest.raises(ConflictError, match=f"fact {b.id} already says this"):
        memory.supersede_fact(a.id, "python 3.12 everywhere")
    assert memory.get_fact(a.id).status == "active"  # nothing lost


def test_bulk_import_maps_duplicates_to_the_fact_they_repeat(memory: Memory) -> None:  # N1
    existing = memory.add_fact("uses tabs", "convention")
    ids = memory.add_facts(
        [
            ("Uses  TABS", "convention"),
            ("new one", "learning"),
            ("NEW ONE", "learning"),
            ("Uses tabs.", "convention"),
        ]  # X5: punctuation makes it another fact
    )
    assert ids[0] == existing.id and ids[1] == ids[2] != existing.id
    assert ids[3] not in (existing.id, ids[1])
    assert memory.stats().facts_active == 3


def test_the_agent_tool_answers_with_the_existing_id(memory: Memory) -> None:  # N1 A1
    first = call_tool(
        memory, "memory_update", {"content": "ships on Tuesdays", "category": "decision"}
    )
    second = call_tool(
        memory, "memory_update", {"content": "Ships on  TUESDAYS", "category": "decision"}
    )
    assert second["fact"]["duplicate"] is True
    assert second["fact"]["id"] == first["fact"]["id"]
    assert "supersede" in second["fact"]["hint"]


def test_the_cli_says_not_stored_and_how_to_supersede(run: Any) -> None:  # N1 C
    assert run("fact", "add", "Uses tabs for indentation in C", "-c", "convention").code == 0
    again = run("fact", "add", "uses TABS for  indentation in C", "-c", "convention")
    assert again.code == 0 and again.out.startswith("not stored: fact 1 already says this")
    assert "memdir fact supersede 1" in again.out
    near = run("fact", "add", "Uses tabs for indentation in C files", "-c", "convention")
    assert near.code == 0 and near.out.strip() == "fact 2 stored (convention)"
    assert "resembles fact 1" in near.err
    listed = run("search", "tabs", "--mode", "lexical", "--json").json()
    assert sorted(h["id"] for h in listed) == [1, 2]


ADD_SAME = """
import sys
from memdir import Memory
with Memory() as mem:
    print(mem.add_fact("The build uses ninja", "learning").id)
"""


@pytest.mark.slow
def test_processes_adding_one_fact_at_once_store_it_once(state_dir: Path) -> None:  # N1 L3
    Memory().add_fact("warm-up", "learning")  # the db exists: the race is on the fact
    env = cli_env(str(state_dir))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ADD_SAME], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    ids = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert len(ids) == 1
    with Memory() as mem:
        assert mem.stats().facts_active == 2


# -- entries, procedures, markers ------------------------------------------------------------


def test_an_entry_with_another_entrys_body_is_written_and_named(memory: Memory) -> None:
    # X5, G2: the name is the identity; the same body under another name is reported
    memory.write_entry("ci-duration", "how long CI takes", "CI takes ~12 min on main.")
    twin = memory.write_entry("ci-time", "CI time", "ci takes ~12 min on main.")
    assert not twin.duplicate and twin.name == "ci-time"
    assert [(s.kind, s.ref, s.how, s.score) for s in twin.similar] == [
        ("entry", "ci-duration", "exact", 1.0)
    ]
    assert "ci-duration" in (twin.hint or "")
    assert [e.name for e in memory.entries()] == ["ci-duration", "ci-time"]
    # rewriting the same name with something new is an upsert (G2), not a duplicate
    again = memory.write_entry("ci-duration", "how long CI takes", "CI takes ~14 min on main.")
    assert not again.duplicate and memory.entry("ci-duration").content == (
        "CI takes ~14 min on main.\n"
    )


def test_a_near_duplicate_entry_is_written_and_named(memory: Memory) -> None:  # N1 G2
    memory.write_entry("deploy", "deploying", "Deploy staging with make deploy then smoke test")
    near = memory.write_entry(
        "deploy-staging", "staging", "deploy staging with make deploy then run the smoke test"
    )
    assert not near.duplicate and [s.ref for s in near.similar] == ["deploy"]
    assert {e.name for e in memory.entries()} == {"deploy", "deploy-staging"}


def test_a_memorized_entry_like_another_is_stored_and_reported(memory: Memory) -> None:
    # N1 M4, X5: stored under its name, the other entry named; an exact repeat is a no-op
    memory.write_entry("tz", "timezone", "The user is in Europe/Paris")
    block = json.dumps(
        {
            "scope": "global",
            "name": "user-tz",
            "description": "tz",
            "content": "the user is in Europe/Paris",
        }
    )
    result = memory.ingest(f"ok\nMEMDIR_MEMORIZE_BEGIN\n{block}\nMEMDIR_MEMORIZE_END\n")
    assert result.output == "ok\n" and result.warnings == []
    [applied] = result.applied
    assert (applied.scope, applied.target, applied.action) == ("global", "user-tz", "created")
    assert [s.ref for s in applied.similar] == ["tz"] and "tz" in (applied.hint or "")
    assert [e.name for e in memory.entries()] == ["tz", "user-tz"]
    again = memory.ingest(f"MEMDIR_MEMORIZE_BEGIN\n{block}\nMEMDIR_MEMORIZE_END\n")
    assert [(a.target, a.action) for a in again.applied] == [("user-tz", "unchanged")]


def test_a_procedure_like_another_is_written_and_named(memory: Memory) -> None:  # P1 X5
    memory.write_procedure("release", "---\ndescription: cut a release\n---\n1. tag\n2. push\n")
    twin = memory.write_procedure("ship", "1. Tag\n2. Push\n")
    assert not twin.duplicate and twin.name == "ship"
    assert [(s.ref, s.how) for s in twin.similar] == [("release", "exact")]
    assert sorted(p.name for p in memory.procedures()) == ["release", "ship"]
    near = memory.write_procedure("ship", "1. tag the commit\n2. push\n")
    assert not near.duplicate and [s.ref for s in near.similar] == ["release"]
    assert memory.procedure("ship").content == "1. tag the commit\n2. push\n"


def test_rewriting_a_procedure_with_what_it_holds_changes_nothing(memory: Memory) -> None:
    # P1, X5: write = create or overwrite; the very same text is a no-op, reported
    memory.write_procedure("release", "1. tag\n2. push\n")
    again = memory.write_procedure("release", "1. tag\n2. push\n")
    assert again.duplicate and again.name == "release" and again.similar == ()
    changed = memory.write_procedure("release", "1. Tag\n2. Push\n")  # case: an update
    assert not changed.duplicate and memory.procedure("release").content == "1. Tag\n2. Push\n"


def test_semantic_near_duplicate_entries_and_procedures(state_dir: Path) -> None:  # N1 Q2
    with Memory(embedder=HashEmbedder()) as mem:
        mem.write_entry("kiwi-orchard", "the orchard", "kiwi " * 10 + "orchard")
        mem.write_procedure("kiwi-picking", "kiwi " * 10 + "picking")
        mem.search("kiwi", mode="semantic")  # indexes and embeds what is there
        entry = mem.write_entry("kiwi-harvest", "the harvest", "kiwi " * 10 + "harvest")
        assert [(s.kind, s.ref, s.how) for s in entry.similar] == [
            ("entry", "kiwi-orchard", "semantic")
        ]
        assert entry.hint is not None and "kiwi-orchard" in entry.hint
        proc = mem.write_procedure("kiwi-packing", "kiwi " * 10 + "packing")
        assert [(s.kind, s.ref, s.how) for s in proc.similar] == [
            ("procedure", "kiwi-picking", "semantic")
        ]
    with Memory() as plain:  # no model loaded yet: the guard does not load it, so lexical
        other = plain.write_entry("kiwi-storage", "storage", "kiwi " * 10 + "storage")
        assert other.similar == ()


def test_the_entry_guard_sees_hand_edits(memory: Memory) -> None:  # N1 G4
    memory.write_entry("first", "one", "alpha beta gamma")
    memory.write_entry("second", "two", "delta epsilon zeta")
    path = Path(memory.path, "global", "second.md")
    text = path.read_text(encoding="utf-8").replace("delta epsilon zeta", "the kiwi harvest")
    path.write_text(text + "\n", encoding="utf-8")  # another size: the cache sees the edit
    twin = memory.write_entry("third", "three", "The kiwi  harvest")
    assert not twin.duplicate and [(s.ref, s.how) for s in twin.similar] == [("second", "exact")]
    path.unlink()
    alone = memory.write_entry("fourth", "four", "The kiwi  harvest")
    assert [(s.ref, s.how) for s in alone.similar] == [("third", "exact")]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The backend is written in C++", "The backend is written in C#"),
        ("Server timezone is UTC+2", "Server timezone is UTC-2"),
        ("Retry count is -1", "Retry count is 1"),
        ("👍", "🚀"),
    ],
)
def test_symbols_that_change_the_meaning_are_not_set_aside(
    memory: Memory, first: str, second: str
) -> None:  # N1: only sentence punctuation and markup are
    a = memory.add_fact(first, "decision")
    b = memory.add_fact(second, "decision")
    assert not b.duplicate and b.id != a.id
    changed = memory.supersede_fact(a.id, second + " now")
    assert not changed.duplicate and changed.supersedes == a.id


def test_a_case_or_punctuation_fix_is_a_real_supersede(memory: Memory) -> None:  # N1 F3
    fact = memory.add_fact("the flag is feature-x", "convention")
    fixed = memory.supersede_fact(fact.id, "The flag is Feature-X.")
    assert not fixed.duplicate and fixed.content == "The flag is Feature-X."
    assert [f.status for f in memory.fact_history(fixed.id)] == ["superseded", "active"]
    assert memory.supersede_fact(fixed.id, "The flag is Feature-X.").duplicate  # same text


def test_texts_without_words_are_never_duplicates(memory: Memory) -> None:  # N1
    assert memory.add_fact("...", "learning").id != memory.add_fact("!!!", "learning").id
    memory.write_procedure("deploy-staging", "---\ndescription: deploy staging\n---\n")
    other = memory.write_procedure("rollback-prod", "---\ndescription: roll back\n---\n")
    assert not other.duplicate


def test_the_procedure_guard_sees_hand_edits(memory: Memory) -> None:  # N1 P1
    memory.write_procedure("release", "1. tag\n2. push\n")
    memory.write_procedure("deploy", "1. build\n2. ship\n")
    path = Path(memory.path, "procedures", "deploy.md")
    path.write_text("1. rotate the keys\n2. restart the workers\n", encoding="utf-8")
    twin = memory.write_procedure("rotate", "1. Rotate the keys\n2. Restart the workers")
    assert not twin.duplicate and [(s.ref, s.how) for s in twin.similar] == [("deploy", "exact")]
    path.unlink()
    alone = memory.write_procedure("rekey", "1. Rotate the keys\n2. Restart the workers")
    assert [(s.ref, s.how) for s in alone.similar] == [("rotate", "exact")]


# -- the bulk path keeps what one write keeps (X5) -------------------------------------------


def _sketch_rows(state: Path) -> list[tuple[int, int]]:
    db = sqlite3.connect(state / "memory" / "memory.db")
    try:
        return list(db.execute("SELECT key, fact_id FROM fact_sketch ORDER BY key, fact_id"))
    finally:
        db.close()


def test_a_bulk_import_stores_the_band_keys_one_write_by_one_would(tmp_path: Path) -> None:
    # X5: add_facts (many facts: one SQL statement) and add_fact (one at a time) store the
    # same candidates, exact duplicates and textless facts included
    texts = [f"Fact {i}: the cache of socket {i % 7} times out after {i % 5} s." for i in range(40)]
    texts += ["fact 3: the CACHE of socket 3 times out after 3 s.", "- * -", "Ünïcode wörds (C++)."]
    rows = [(text, "learning") for text in texts]
    bulk = Memory(tmp_path / "bulk", env={}, cwd=tmp_path, create=True)
    ids = bulk.add_facts(rows)
    single = Memory(tmp_path / "single", env={}, cwd=tmp_path, create=True)
    one_by_one = [single.add_fact(text, "learning").id for text in texts]
    bulk.close()
    single.close()
    assert ids == one_by_one
    stored = _sketch_rows(tmp_path / "bulk")
    assert stored == _sketch_rows(tmp_path / "single")
    assert len({fact_id for _, fact_id in stored}) == len(set(ids)) - 1  # "- * -": no words


@pytest.mark.parametrize("count", [3, 30])  # row by row, and one statement
def test_band_keys_of_an_import_into_a_store_holding_facts_go_to_their_facts(
    tmp_path: Path, count: int
) -> None:
    # X5: the keys of an import's new facts, handed to SQLite by their position among the
    # new facts, land on those facts' ids (after facts stored before, around a textless
    # one and a repeat, which get no keys of their own)
    texts = [
        f"Socket {i} of the cache pool {i * 3} times out, sadly {i % 4}." for i in range(count)
    ]
    texts[1:1] = ["- * -", texts[0].upper()]
    bulk = Memory(tmp_path / "bulk", env={}, cwd=tmp_path, create=True)
    single = Memory(tmp_path / "single", env={}, cwd=tmp_path, create=True)
    for memory in (bulk, single):
        memory.add_fact("The build cache lives under /var/cache/build on CI.", "convention")
    ids = bulk.add_facts([(text, "learning") for text in texts])
    one_by_one = [single.add_fact(text, "learning").id for text in texts]
    bulk.close()
    single.close()
    assert ids == one_by_one and ids[2] == ids[0]
    assert _sketch_rows(tmp_path / "bulk") == _sketch_rows(tmp_path / "single")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=60), min_size=0, max_size=40))
def test_remembered_words_and_hashes_change_no_measure(texts: list[str]) -> None:  # X5
    # the words of a text, trimmed once and remembered, and its band keys, from remembered
    # hash rows or vectorised, are those computed afresh from the definitions
    def plain_words(text: str) -> frozenset[str]:
        found = set()
        for raw in similarity.normalize(text).split():
            token = raw.strip(similarity.EDGE)
            if token and token not in similarity.MARKUP and token.strip("#"):
                found.add(token)
        bag = frozenset(found)
        return (bag - STOPWORDS) or bag

    def plain_keys(bag: frozenset[str]) -> list[int]:
        if not bag:
            return []
        hashes = similarity.word_hashes(bag)
        mins = [
            min(((a * h + b) & similarity.MASK64) >> 32 for h in hashes)
            for a, b in similarity.HASHES
        ]
        r = similarity.ROWS
        return [similarity._band_key(i, mins[i * r : (i + 1) * r]) for i in range(similarity.BANDS)]

    bags = [similarity.words(text) for text in texts]
    assert bags == [plain_words(text) for text in texts]
    assert [similarity.words(text) for text in texts] == bags  # now from the memo
    expected = [plain_keys(bag) for bag in bags]
    assert [similarity.band_keys(bag) for bag in bags] == expected
    assert similarity.band_keys_many(bags) == expected


def test_the_bulk_sketcher_gives_the_keys_of_one_text_at_a_time() -> None:
    # N1: the vectorised path of a bulk import (words coded at once, minima over repeats)
    # gives every text the keys band_keys gives it alone: stopwords-only texts, markup,
    # edge punctuation, empty texts, Unicode, and a vocabulary that starts again
    rnd = random.Random(7)
    vocabulary = ["the", "a", "of", "dark", "mode", "-", "*", "•", "C++", "(x)", "«ok»", "é",
                  "e\u0301", "#tag", "##", "...", "don't", "—", "x²", "🙂", "node.js"]  # fmt: skip
    texts = ["", "the a of", "- * •", "**Bold** (see C++).", "ǰ ﬁ", "# ## ###"]
    texts += [" ".join(rnd.choices(vocabulary, k=rnd.randint(0, 9))) for _ in range(3000)]
    normals = [similarity.normalize(text) for text in texts]
    expected = [similarity.band_keys(similarity.words_of_normal(n)) for n in normals]
    assert similarity.Sketcher().keys(normals) == expected
    small = similarity.Sketcher()
    small.LIMIT = 5  # forgets its words every few texts
    assert small.keys(normals) == expected
    assert similarity.sketches(texts) == expected


def test_a_bulk_import_stores_every_text_exactly(tmp_path: Path) -> None:
    # F1: the facts of a bulk import go in as one JSON document: quotes, backslashes,
    # control characters, line breaks and characters outside the BMP come back unchanged
    odd = ['say "hi" \\n not a break', "tab\there\r\nline", "emoji 🙂 and 𝔘𝔫𝔦", "nul\x01\x1f end",
           "json: {\"a\": [1, 2]}", "ünïcödé ", "inner   spacing kept"]  # fmt: skip
    rows = [(f"{text} #{i}", "learning") for i in range(200) for text in odd]
    memory = Memory(tmp_path / "s", env={}, cwd=tmp_path, create=True)
    ids = memory.add_facts(rows)
    assert len(set(ids)) == len(rows)
    stored = {fact_id: memory.get_fact(fact_id) for fact_id in ids[:50] + ids[-50:]}
    for fact_id, (content, _) in zip(ids[:50] + ids[-50:], rows[:50] + rows[-50:], strict=True):
        fact = stored[fact_id]
        assert fact.content == content
    memory.close()


# -- a large import's band keys, indexed after it (N1) ----------------------------------------

LARGE = 700  # more facts than an import indexes its band keys for at once (SKETCH_LATER)


def _large_import(count: int = LARGE) -> list[tuple[str, str]]:
    return [
        (f"Service {i} on shard {i % 13} retries {i % 7} times before paging team {i}.", "learning")
        for i in range(count)
    ]


def _expected_sketch(state: Path) -> list[tuple[int, int]]:
    """The band keys every active fact has by definition: what one write at a time stores."""
    db = sqlite3.connect(state / "memory" / "memory.db")
    try:
        rows = db.execute("SELECT id, content FROM facts WHERE status = 'active'").fetchall()
    finally:
        db.close()
    return sorted(
        (key, fact_id)
        for fact_id, content in rows
        for key in similarity.band_keys(similarity.words(content))
    )


def _guard_lock_free(state: Path) -> bool:
    from memdir.search import worker

    return not worker.running(str(state / "worker" / "guard.lock"))


@pytest.fixture
def guard_held(tmp_path: Path) -> Any:
    """The store's guard worker lock, held by the test: a worker the import starts exits at
    once, so the keys wait for as long as the test needs them to."""
    import fcntl

    state = tmp_path / "held"
    (state / "worker").mkdir(parents=True, mode=0o700)
    handle = open(state / "worker" / "guard.lock", "a")  # noqa: SIM115 - held until the end
    fcntl.flock(handle, fcntl.LOCK_EX)
    yield state
    handle.close()


@pytest.mark.sqlite_only  # PostgreSQL indexes an import's keys with it
def test_the_guard_worker_indexes_a_large_imports_band_keys_and_exits(tmp_path: Path) -> None:
    # N1: the import leaves its band keys for later; the worker it starts indexes exactly
    # the keys one write at a time would have stored, then lets go of its lock and exits
    state = tmp_path / "store"
    with Memory(state, env={}, cwd=tmp_path, create=True) as memory:
        ids = memory.add_facts(_large_import())
        assert len(set(ids)) == LARGE
        deadline = time.monotonic() + 60
        while memory.settle_imported(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.settle_imported(0) == 0
    while not _guard_lock_free(state) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _guard_lock_free(state)
    assert _sketch_rows(state) == _expected_sketch(state)
    assert "Traceback" not in (state / "worker" / "log").read_text()


@pytest.mark.sqlite_only
def test_imported_keys_that_wait_are_seen_by_every_reader_and_indexed_by_the_next_write(
    guard_held: Path,
) -> None:
    # N1: while an import's keys wait (no worker got to them), doctor's pairs (a read that
    # writes nothing) find its near duplicates; the next write indexes them all first, so
    # its own report names an imported twin, and a fact removed meanwhile gets no keys
    rows = _large_import()
    rows.append(("Service 5 on shard 5 retries 5 times before paging team 5!", "learning"))
    with Memory(guard_held, env={}, cwd=guard_held, create=True) as memory:
        before = memory.add_fact("Service 3 on shard 3 retries 3 times, paging team 3", "learning")
        indexed = _sketch_rows(guard_held)
        ids = memory.add_facts(rows)
        assert memory.settle_imported(0) == len(rows)
        assert _sketch_rows(guard_held) == indexed
        pairs = {(p.first.id, p.second.id) for p in memory.store.sketch_pairs()}
        assert (ids[5], ids[-1]) in pairs  # two waiting facts
        assert (before.id, ids[3]) in pairs  # an indexed fact and a waiting one
        assert memory.settle_imported(0) == len(rows)  # the read indexed nothing
        memory.remove_fact(ids[7])  # a write: indexes what waits, then drops its keys
        assert memory.settle_imported(0) == 0
        twin = memory.add_fact(
            "Service 9, on shard 9, retries 2 times before paging team 9", "learning"
        )
        assert ids[9] in [s.ref for s in twin.similar]
    assert _sketch_rows(guard_held) == _expected_sketch(guard_held)
    assert all(fact_id != ids[7] for _, fact_id in _sketch_rows(guard_held))


def test_a_near_duplicate_of_a_freshly_imported_fact_is_named(memory: Memory) -> None:
    # N1 on every backend: right after a large import (its keys indexed later, or with it),
    # a write that nearly repeats an imported fact names it
    ids = memory.add_facts(_large_import())
    twin = memory.add_fact(
        "Service 42 on shard 3 retries 0 times before paging team 42!", "learning"
    )
    assert ids[42] in [s.ref for s in twin.similar]


@pytest.mark.sqlite_only
def test_two_guard_workers_at_once_index_once_and_both_exit(tmp_path: Path) -> None:
    # N1: never two for one store: of two started at the same moment one indexes, the
    # other exits at once; both are gone afterwards and the keys are those of one pass
    import fcntl

    state = tmp_path / "store"
    (state / "worker").mkdir(parents=True, mode=0o700)
    with open(state / "worker" / "guard.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the import's own worker exits at once
        with Memory(state, env={}, cwd=tmp_path, create=True) as memory:
            memory.add_facts(_large_import(LARGE * 3))
            assert memory.settle_imported(0) == LARGE * 3
            memory_dir = memory.layout.memory_dir
    command = [sys.executable, "-m", "memdir.guard_worker", str(state), memory_dir]
    workers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = [w.communicate(timeout=120) for w in workers]
    assert [w.returncode for w in workers] == [0, 0] and [e for _, e in said] == ["", ""]
    # one indexed them all; the other found the lock taken (or, later, nothing waiting)
    assert sorted(_indexed(out) for out, _ in said) == [0, LARGE * 3]
    assert _guard_lock_free(state)
    assert _sketch_rows(state) == _expected_sketch(state)
    with Memory(state, env={}, cwd=tmp_path) as memory:
        assert memory.settle_imported(0) == 0


def _indexed(said: str) -> int:
    """How many facts' keys a guard worker says it indexed (its one line)."""
    found = re.fullmatch(r"indexed the band keys of (\d+) facts\n", said)
    assert found, said
    return int(found[1])


@pytest.mark.sqlite_only
def test_a_guard_worker_whose_store_is_gone_exits(tmp_path: Path) -> None:
    # N1: never left behind: a store removed before its keys were indexed ends its worker
    command = [sys.executable, "-m", "memdir.guard_worker", str(tmp_path / "nowhere"), "/x"]
    gone = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and "no store to index" in gone.stderr
    assert not (tmp_path / "nowhere").exists()  # and it made nothing there


@pytest.mark.sqlite_only
def test_a_guard_worker_whose_store_goes_while_it_waits_indexes_nothing_and_exits(
    tmp_path: Path,
) -> None:
    # N1: a worker waiting for its turn (here behind a write the test holds) whose store is
    # moved away meanwhile stops at its next look, and writes nothing into it
    import fcntl

    state = tmp_path / "store"
    (state / "worker").mkdir(parents=True, mode=0o700)
    with open(state / "worker" / "guard.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the import's own worker exits at once
        with Memory(state, env={}, cwd=tmp_path, create=True) as memory:
            memory.add_facts(_large_import())
            memory_dir = memory.layout.memory_dir
    writer = sqlite3.connect(Path(memory_dir) / "memory.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the worker cannot index: it waits its turn
    command = [sys.executable, "-m", "memdir.guard_worker", str(state), memory_dir]
    waiting = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _guard_lock_free(state) and waiting.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert waiting.poll() is None  # it holds the lock and waits
    moved = tmp_path / "moved"
    state.rename(moved)
    out, err = waiting.communicate(timeout=120)
    writer.rollback()
    writer.close()
    assert waiting.returncode == 0 and err == "" and _indexed(out) == 0
    assert not state.exists()  # and it made nothing there
    with Memory(moved, env={"MEMDIR_MEMORY_DIR": str(moved / "memory")}, cwd=tmp_path) as memory:
        assert memory.settle_imported(0) == LARGE  # nothing went into the moved store


@pytest.mark.sqlite_only
def test_a_restore_with_gaps_in_its_ids_waits_by_runs_and_pairs_large_ids(
    guard_held: Path,
) -> None:
    # N1: a restore keeps its ids, gaps and all: what waits is one range a run of
    # consecutive ids (counted by the facts, not the width from the first to the last), and
    # doctor's pairs name facts whose ids pass 32 bits
    far = 2**40
    texts = [text for text, _ in _large_import()]
    rows: list[dict[str, object]] = [
        {"id": i + 1, "category": "learning", "content": text} for i, text in enumerate(texts)
    ]
    rows.append({"id": far, "category": "learning", "content": texts[5] + "!"})
    with Memory(guard_held, env={}, cwd=guard_held, create=True) as memory:
        stored = memory.import_facts(rows, keep_ids=True)
        assert stored[far] == far
        assert memory.settle_imported(0) == LARGE + 1
        pairs = {(p.first.id, p.second.id) for p in memory.store.sketch_pairs()}
        assert (6, far) in pairs
        assert memory.settle_imported(LARGE + 1) == 0  # two runs: two short walks
    assert _sketch_rows(guard_held) == _expected_sketch(guard_held)
