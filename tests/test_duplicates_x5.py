"""X5: a write is never refused by a heuristic.

For entries and procedures the name is the identity: a write under a new name is stored,
whatever it says; a body like another's is reported in `similar`, naming it; only a write
that repeats an item exactly (same name, description and body) changes nothing. For facts,
an exact duplicate is the same text up to case, Unicode form (NFC) and spacing only:
punctuation, symbols and bullets make another fact, stored and reported as near. The same
on every path: the Python API, memorize markers, the CLI, the MCP server (the real SDK
client), bulk adds, supersede, the importers and an archive merge; and on stores written
before (migration 8)."""

from __future__ import annotations

import json
import os
import sqlite3
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memdir import ConflictError, Memory, duplicates, similarity
from memdir.curation import archive
from memdir.curation import duplicates as duplicate_scan
from memdir.curation.importers import run as import_from
from memdir.errors import ValidationError
from memdir.storage.sqlite.migrations import MIGRATIONS
from memdir.testing import FixedClock

# Texts that differ only in punctuation, symbols or markup: different facts (X5).
PUNCTUATION_PAIRS = [
    ("credit - debit", "credit + debit"),
    (".5 seconds", "5 seconds"),
    ("~/bin", "/bin"),
    ("!= 0", "= 0"),
    ("C++", "C#"),
    ("v1.2", "v12"),
    ("-1", "1"),
    ("a.b", "ab"),
    ("UTC+2", "UTC-2"),
    ("x²", "x2"),  # NFKC would make these one text: NFC does not
    ("½", "1/2"),
    ("3.14", "314"),
    ("$HOME", "HOME"),
    ("foo()", "foo"),
    ("@ada", "ada"),
    ("#42", "42"),
]
# A leading bullet or emphasis, trailing sentence punctuation: still another text.
MARKUP_PAIRS = [
    ("- uses tabs for indentation", "uses tabs for indentation"),
    ("* uses tabs for indentation", "uses tabs for indentation"),
    ("uses **tabs** for indentation", "uses tabs for indentation"),
    ("uses tabs for indentation.", "uses tabs for indentation"),
    ("uses tabs for indentation!", "uses tabs for indentation?"),
    ('"uses tabs" for indentation', "uses tabs for indentation"),
]
# The same text up to case, Unicode form and spacing: exact duplicates.
EXACT_VARIANTS = [
    ("Uses tabs for indentation", "uses TABS for indentation"),
    ("uses tabs for indentation", "  uses\ttabs   for\nindentation  "),
    ("uses tabs for indentation", "uses\u00a0tabs for indentation"),  # no-break space
    ("Caf\u00e9 opens at 9", "Cafe\u0301 opens at 9"),  # NFC and NFD spellings
    ("STRASSE is long", "straße is long"),  # full case folding
    ("\u01f0 is a letter", "J\u030c is a letter"),  # folding decomposes: NFC again
]


def sentence(words: str) -> str:
    """A fact with enough words around the pair that the two read as near duplicates."""
    return f"the nightly batch job sets its retry budget to {words} for every region"


def db_rows(memory: Memory, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(memory.layout.db)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


# -- the measure -------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), PUNCTUATION_PAIRS + MARKUP_PAIRS)
def test_x5_punctuation_makes_another_key(a: str, b: str) -> None:
    assert similarity.normalize(a) != similarity.normalize(b)
    assert similarity.text_key(a) != similarity.text_key(b)


@pytest.mark.parametrize(("a", "b"), EXACT_VARIANTS)
def test_x5_case_unicode_form_and_spacing_are_one_key(a: str, b: str) -> None:
    assert similarity.normalize(a) == similarity.normalize(b)
    assert similarity.text_key(a) == similarity.text_key(b)
    assert unicodedata.is_normalized("NFC", similarity.normalize(b))


# -- facts: Python API, bulk, supersede ----------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), PUNCTUATION_PAIRS + MARKUP_PAIRS)
def test_x5_facts_differing_in_punctuation_are_both_stored(memory: Memory, a: str, b: str) -> None:
    first = memory.add_fact(a, "learning")
    second = memory.add_fact(b, "learning")
    assert not second.duplicate and second.id != first.id and second.content == b.strip()
    assert memory.stats().facts_active == 2
    assert {memory.get_fact(first.id).content, memory.get_fact(second.id).content} == {
        a.strip(),
        b.strip(),
    }


@pytest.mark.parametrize(("a", "b"), PUNCTUATION_PAIRS + MARKUP_PAIRS)
def test_x5_such_facts_are_reported_as_near_duplicates(memory: Memory, a: str, b: str) -> None:
    first = memory.add_fact(sentence(a), "learning")
    second = memory.add_fact(sentence(b), "learning")
    assert not second.duplicate and second.id != first.id
    assert [(s.kind, s.ref) for s in second.similar] == [("fact", first.id)]
    assert second.hint is not None and second.hint.startswith("stored;")


def test_x5_credit_minus_and_plus_debit_are_near_with_score_one(memory: Memory) -> None:
    # the near measure trims symbols standing alone: the words are the same, the texts not
    first = memory.add_fact("credit - debit", "convention")
    second = memory.add_fact("credit + debit", "convention")
    assert not second.duplicate
    assert [(s.ref, s.how, s.score) for s in second.similar] == [(first.id, "lexical", 1.0)]


@pytest.mark.parametrize(("a", "b"), EXACT_VARIANTS)
def test_x5_case_unicode_form_and_spacing_variants_are_exact(
    memory: Memory, a: str, b: str
) -> None:
    first = memory.add_fact(a, "learning")
    again = memory.add_fact(b, "decision")
    assert again.duplicate and again.id == first.id and again.content == first.content
    assert memory.stats().facts_active == 1
    assert memory.fact_saying(b) == memory.get_fact(first.id)


def test_x5_bulk_add_follows_the_same_rules(memory: Memory) -> None:
    pairs = PUNCTUATION_PAIRS + MARKUP_PAIRS
    ids = memory.add_facts([(text, "learning") for pair in pairs for text in pair])
    assert all(ids[i] != ids[i + 1] for i in range(0, len(ids), 2))
    distinct = {text for pair in pairs for text in pair}  # MARKUP_PAIRS share their second
    assert len(set(ids)) == len(distinct) == memory.stats().facts_active
    more = memory.add_facts([(text, "learning") for pair in EXACT_VARIANTS for text in pair])
    assert all(more[i] == more[i + 1] for i in range(0, len(more), 2))
    assert more[0] == more[2] == more[4] == ids[-1]  # "uses tabs for indentation", above
    assert len(set(more)) == len({similarity.normalize(a) for a, _ in EXACT_VARIANTS}) == 4
    assert memory.stats().facts_active == len(distinct) + 3


def test_x5_supersede_into_a_punctuation_variant_of_another_fact(memory: Memory) -> None:
    other = memory.add_fact("credit + debit", "convention")
    fact = memory.add_fact("credit only", "convention")
    changed = memory.supersede_fact(fact.id, "credit - debit")
    assert not changed.duplicate and changed.supersedes == fact.id
    assert [s.ref for s in changed.similar] == [other.id]
    # the same text as another active fact, up to case and spacing: refused, nothing lost
    with pytest.raises(ConflictError, match=f"fact {other.id} already says this"):
        memory.supersede_fact(changed.id, "CREDIT  +  debit")
    assert memory.get_fact(changed.id).status == "active"
    # a punctuation fix of the fact itself is a real new version
    fixed = memory.supersede_fact(changed.id, "credit - debit.")
    assert not fixed.duplicate and fixed.supersedes == changed.id


# -- entries and procedures: Python API and memorize ---------------------------------------------


def blocks(items: list[dict[str, str]]) -> str:
    return "".join(
        f"MEMDIR_MEMORIZE_BEGIN\n{json.dumps(item)}\nMEMDIR_MEMORIZE_END\n" for item in items
    )


def test_x5_sixty_memorize_blocks_with_one_body_store_sixty_entries(memory: Memory) -> None:
    items = [
        {
            "scope": "global",
            "name": f"note-{i:02d}",
            "description": f"note number {i}",
            "content": "c",
        }
        for i in range(60)
    ]
    result = memory.ingest("text\n" + blocks(items))
    assert result.warnings == []
    assert [(a.target, a.action) for a in result.applied] == [
        (f"note-{i:02d}", "created") for i in range(60)
    ]
    assert result.applied[0].similar == ()
    for applied in result.applied[1:]:  # each names one that holds the same body
        assert applied.similar and all(s.how == "exact" for s in applied.similar)
        assert applied.similar[0].ref in {f"note-{i:02d}" for i in range(60)} - {applied.target}
        assert "already says this" not in (applied.hint or "")
    assert [e.name for e in memory.entries()] == [f"note-{i:02d}" for i in range(60)]
    index = Path(memory.layout.index_file).read_text(encoding="utf-8").splitlines()
    assert index == [f"- note-{i:02d} — note number {i}" for i in range(60)]


def test_x5_an_entry_repeated_exactly_is_not_rewritten(state_dir: Path) -> None:
    clock = FixedClock()
    with Memory(clock=clock, agent="one") as mem:
        first = mem.write_entry("ci-duration", "how long CI takes", "CI takes ~12 min.")
        path = Path(mem.layout.entry("ci-duration"))
        before = (path.read_bytes(), path.stat().st_mtime_ns)
        clock.advance(3600)
        again = mem.write_entry("ci-duration", "how long CI takes", "CI takes ~12 min.\n")
        assert again.duplicate and again.name == "ci-duration"
        assert again.updated == first.updated and again.content == "CI takes ~12 min.\n"
        assert again.hint is not None and "ci-duration" in again.hint
        assert (path.read_bytes(), path.stat().st_mtime_ns) == before
        # anything different under the name is an update (G2): description, body, case
        for description, body in [
            ("how long CI runs", "CI takes ~12 min."),
            ("how long CI runs", "CI takes ~12 Min."),
            ("how long CI runs", "CI takes ~12 Min"),
        ]:
            clock.advance(60)
            updated = mem.write_entry("ci-duration", description, body)
            assert not updated.duplicate and updated.updated != first.updated
            assert (mem.entry("ci-duration").description, mem.entry("ci-duration").content) == (
                description,
                body + "\n",
            )
        assert mem.entry("ci-duration").created == first.created


def test_x5_a_procedure_repeated_exactly_is_not_rewritten(memory: Memory) -> None:
    text = "---\ndescription: cut a release\n---\n1. tag\n2. push\n"
    memory.write_procedure("release", text)
    path = Path(memory.layout.procedure("release"))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    again = memory.write_procedure("release", text)
    assert again.duplicate and again.name == "release" and again.hint
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    twin = memory.write_procedure("ship", text)  # a new name: stored, the other named
    assert not twin.duplicate and [(s.ref, s.how) for s in twin.similar] == [("release", "exact")]
    assert Path(memory.layout.procedure("ship")).read_text(encoding="utf-8") == text


def test_x5_many_entries_with_one_body_are_all_stored_and_a_few_named(
    memory: Memory,
) -> None:  # the guard reads NAMED_CANDIDATES others at most, and names MAX_REPORTED
    for i in range(40):
        memory.write_entry(f"same-{i:02d}", f"copy {i}", "one body for all")
    last = memory.write_entry("same-last", "last copy", "one body for all")
    assert len(last.similar) == duplicates.MAX_REPORTED
    assert len(memory.entries()) == 41


# -- the CLI -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_x5_cli_facts_procedures_and_memorize(run: Callable[..., Any]) -> None:
    for text in ("credit - debit", "credit + debit", ".5 seconds", "5 seconds"):
        added = run("fact", "add", text, "-c", "convention")
        assert added.code == 0 and added.out.startswith("fact ") and "stored" in added.out
    assert run("fact", "add", "CREDIT  -  debit", "-c", "convention").out.startswith(
        "not stored: fact 1"
    )
    listed = run("search", "credit", "--mode", "lexical", "--json").json()
    assert sorted(h["content"] for h in listed) == ["credit + debit", "credit - debit"]

    assert run("procedure", "write", "release", "-", input="1. tag\n2. push\n").code == 0
    twin = run("procedure", "write", "ship", "-", input="1. tag\n2. push\n")
    assert twin.code == 0 and twin.out.strip().startswith("procedure ship written")
    assert "release" in twin.err
    same = run("procedure", "write", "ship", "-", input="1. tag\n2. push\n")
    assert same.code == 0 and same.out.startswith("unchanged: procedure 'ship'")

    items = [
        {"scope": "global", "name": f"n-{i}", "description": f"d {i}", "content": "c"}
        for i in range(5)
    ]
    done = run("memorize", "--json", input=blocks(items))
    assert done.code == 0, done.err
    assert [a["action"] for a in done.json()["applied"]] == ["created"] * 5
    assert [e["name"] for e in run("list", "--json").json()] == [f"n-{i}" for i in range(5)]
    again = run("memorize", "--json", input=blocks(items[:1]))
    assert [a["action"] for a in again.json()["applied"]] == ["unchanged"]


# -- the MCP server, through the real SDK client --------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_x5_mcp_tools_store_what_is_distinct(state_dir: Path) -> None:
    from test_mcp import call, stdio_client

    async with stdio_client(state_dir) as client:
        minus = (
            await call(
                client, "memory_update", {"category": "convention", "content": "credit - debit"}
            )
        )["fact"]
        plus = (
            await call(
                client, "memory_update", {"category": "convention", "content": "credit + debit"}
            )
        )["fact"]
        assert plus["duplicate"] is False and plus["id"] != minus["id"]
        assert [(s["ref"], s["score"]) for s in plus["similar"]] == [(minus["id"], 1.0)]
        again = (
            await call(
                client, "memory_update", {"category": "convention", "content": "Credit  -  DEBIT"}
            )
        )["fact"]
        assert again["duplicate"] is True and again["id"] == minus["id"]

        first = (
            await call(
                client, "procedure_write", {"name": "release", "content": "1. tag\n2. push\n"}
            )
        )["procedure"]
        twin = (
            await call(client, "procedure_write", {"name": "ship", "content": "1. tag\n2. push\n"})
        )["procedure"]
        assert first["duplicate"] is False and twin["duplicate"] is False
        assert [(s["ref"], s["how"]) for s in twin["similar"]] == [("release", "exact")]
        same = (
            await call(client, "procedure_write", {"name": "ship", "content": "1. tag\n2. push\n"})
        )["procedure"]
        assert same["duplicate"] is True and same["name"] == "ship"

        items = [
            {"scope": "global", "name": f"m-{i}", "description": f"d {i}", "content": "c"}
            for i in range(3)
        ]
        result = await call(client, "memorize", {"output": blocks(items)})
        assert result["warnings"] == []
        assert [a["action"] for a in result["applied"]] == ["created"] * 3
        assert [s["ref"] for s in result["applied"][1]["similar"]] == ["m-0"]
        repeat = await call(client, "memorize", {"output": blocks(items[2:])})
        assert [(a["target"], a["action"]) for a in repeat["applied"]] == [("m-2", "unchanged")]
    with Memory() as mem:
        assert [e.name for e in mem.entries()] == ["m-0", "m-1", "m-2"]
        assert sorted(p.name for p in mem.procedures()) == ["release", "ship"]
        assert mem.stats().facts_active == 2


# -- importers and the archive merge --------------------------------------------------------------


def test_x5_importers_keep_what_is_distinct(memory: Memory, tmp_path: Path) -> None:
    memory.add_fact("credit - debit", "convention")
    memories = [
        {"id": f"m{i}", "memory": text}
        for i, text in enumerate(
            [
                "credit + debit",
                ".5 seconds",
                "5 seconds",
                "~/bin",
                "/bin",
                "C++",
                "C#",
                "Credit  -  DEBIT",
                "5 SECONDS",
            ]
        )
    ]
    source = tmp_path / "mem0.json"
    source.write_text(json.dumps(memories), encoding="utf-8")
    report = import_from(memory, "mem0", str(source))
    assert [i.source for i in report.imported] == [f"memory m{i}" for i in range(7)]
    reasons = {i.source: i.reason for i in report.skipped}
    assert reasons == {
        "memory m7": "duplicate of fact 1",
        "memory m8": "duplicate of memory m2 earlier in the file",
    }

    project = tmp_path / "proj"  # Claude Code: two files of one text, two entries
    project.mkdir()
    (project / "CLAUDE.md").write_text("- Use pnpm\n", encoding="utf-8")
    (project / ".claude").mkdir()
    (project / ".claude" / "CLAUDE.md").write_text("- Use pnpm\n", encoding="utf-8")
    report = import_from(memory, "claude-code", str(project))
    assert report.skipped == []
    notes = {i.target: i.note for i in report.imported}
    assert len(notes) == 2 and "claude-md" in notes
    [other] = set(notes) - {"claude-md"}
    assert "claude-md" in (notes[other] or "")
    assert memory.entry(other).content == memory.entry("claude-md").content
    again = import_from(memory, "claude-code", str(project), force=True)
    assert {i.reason for i in again.skipped} == {"the store's copy holds exactly this already"}


def test_x5_a_forced_reimport_reuses_the_copy_of_a_long_hot_md(
    memory: Memory, tmp_path: Path
) -> None:  # H3, X5: a new name is always stored, so the importer looks for its own copy
    text = "".join(f"- line {n:04d}: something durable the agent wrote down\n" for n in range(160))
    source = tmp_path / "afk"
    (source / "procedures").mkdir(parents=True)
    (source / "HOT.md").write_text(text, encoding="utf-8")
    first = import_from(memory, "afk", str(source))
    again = import_from(memory, "afk", str(source), force=True)
    notes = [i.note for r in (first, again) for i in r.imported if i.kind == "hot"]
    assert len(notes) == 2 and all("kept in entry imported-hot-md" in (n or "") for n in notes)
    assert [e.name for e in memory.entries()] == ["imported-hot-md"]
    assert memory.entry("imported-hot-md").content == text


@pytest.mark.sqlite_only  # two memory roots, two stores
def test_x5_an_archive_merge_keeps_facts_that_differ_in_punctuation(tmp_path: Path) -> None:
    with Memory(str(tmp_path / "a"), create=True) as mem:
        for text in ("credit - debit", ".5 seconds", "uses tabs", "C++"):
            mem.add_fact(text, "convention")
        archive.export_to(mem, str(tmp_path / "a.jsonl"))
    with Memory(str(tmp_path / "b"), create=True) as mem:
        for text in ("credit + debit", "5 seconds", "USES  TABS", "C#"):
            mem.add_fact(text, "convention")
        report = archive.import_archive(mem, str(tmp_path / "a.jsonl"), force=True)
        facts = [i for i in report.imported if i.kind == "fact"]
        skipped = [(i.kind, i.reason) for i in report.skipped if i.kind == "fact"]
        assert len(facts) == 3 and skipped == [("fact", "duplicate of fact 3")]
        assert mem.stats().facts_active == 7


# -- doctor --------------------------------------------------------------------------------------


def test_x5_doctor_calls_punctuation_pairs_near_and_same_bodies_a_finding(
    memory: Memory,
) -> None:
    a = memory.add_fact("credit - debit", "convention")
    b = memory.add_fact("credit + debit", "convention")
    memory.write_entry("one", "first", "c")
    memory.write_entry("two", "second", "c")
    groups = {(g.kind, tuple(g.members)): (g.exact, g.how) for g in duplicate_scan.find_all(memory)}
    assert groups[("fact", (a.id, b.id))] == (False, "lexical")
    assert groups[("entry", ("one", "two"))] == (True, "exact")


# -- stores written before: migration 8 ----------------------------------------------------------

EDGE = ".,;:!?\"'`()[]{}«»“”‘’„…_*~"
MARKUP = frozenset({"-", "+", "*", "•", "—", "–", ">", "|"})


def v7_normalize(text: str) -> str:
    """similarity.normalize as schema 7 wrote keys with it (punctuation and bullets set
    aside, no Unicode normalisation), frozen here to build an old store honestly."""
    out = []
    for raw in text.casefold().split():
        token = raw.strip(EDGE)
        if token and token not in MARKUP and token.strip("#"):
            out.append(token)
    return " ".join(out)


def v7_store(state: Path, facts: list[str], entry_body: str) -> None:
    """memory.db at schema 7, its rows as that version's add_fact and entry cache wrote
    them: migrations 1-7 applied and recorded as migrate() does, then the rows."""
    db_path = state / "memory" / "memory.db"
    db_path.parent.mkdir(parents=True)
    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(
        "CREATE TABLE schema_migrations "
        "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied TEXT NOT NULL)"
    )
    for version, name, apply in MIGRATIONS[:7]:
        db.execute("BEGIN IMMEDIATE")
        apply(db)
        db.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00Z')", (version, name)
        )
        db.execute(f"PRAGMA user_version = {version}")
        db.execute("COMMIT")
    t = "2026-01-01T00:00:00Z"
    for text in facts:
        old = v7_normalize(text)
        cursor = db.execute(
            "INSERT INTO facts (category, content, created, updated, valid_from, norm) "
            "VALUES ('learning', ?, ?, ?, ?, ?)",
            (text, t, t, t, similarity.key_of_normal(old)),
        )
        words = frozenset(old.split())
        bag = (words - similarity.STOPWORDS) or words
        db.executemany(
            "INSERT OR IGNORE INTO fact_sketch (key, fact_id) VALUES (?, ?)",
            [(k, cursor.lastrowid) for k in similarity.band_keys(bag)],
        )
    entry = state / "memory" / "global" / "deploy.md"
    entry.parent.mkdir()
    entry.write_text(f"---\nname: deploy\ndescription: how\n---\n{entry_body}", encoding="utf-8")
    info = entry.stat()
    meta = json.dumps({"name": "deploy", "description": "how", "path": "global/deploy.md"})
    db.execute(
        "INSERT INTO entry_cache VALUES ('deploy', ?, ?, 'how', NULL, NULL, ?, ?, '')",
        (info.st_mtime_ns, info.st_size, meta, similarity.key_of_normal(v7_normalize(entry_body))),
    )
    db.close()


@pytest.mark.sqlite_only
def test_x5_migration_8_recomputes_the_keys_of_an_old_store(state_dir: Path) -> None:
    nfd = "Cafe\u0301 opens at 9"
    v7_store(
        state_dir,
        ["Uses tabs.", "credit - debit", "Caf\u00e9 opens at 9", nfd],
        "Deploy staging.\n",
    )
    with Memory() as mem:
        mem.stats()  # opens memory.db: migrates it
        versions = db_rows(mem, "SELECT version, name FROM schema_migrations")
        rows = db_rows(mem, "SELECT id, content, norm FROM facts ORDER BY id")
        assert [norm for _, _, norm in rows] == [similarity.text_key(c) for _, c, _ in rows]
        assert versions[7] == (8, MIGRATIONS[7][1]) and len(versions) == len(MIGRATIONS)
        # the NFD fact's band keys are those of its NFC words now, the old ones are gone
        keys = {k for (k,) in db_rows(mem, "SELECT key FROM fact_sketch WHERE fact_id = 4")}
        assert keys == set(similarity.band_keys(similarity.words(nfd)))
        # new writes meet the old facts under the new rules
        assert mem.add_fact("uses TABS.", "learning").id == 1  # an exact duplicate
        assert not mem.add_fact("Uses tabs", "learning").duplicate  # another fact now
        plus = mem.add_fact("credit + debit", "learning")
        assert not plus.duplicate and [s.ref for s in plus.similar] == [2]
        # two spellings of one text, both kept: reported by doctor, never removed
        groups = [g for g in duplicate_scan.find_all(mem) if g.kind == "fact" and g.exact]
        assert [g.members for g in groups] == [[3, 4]]
        assert mem.stats().facts_active == 6
        # the entry cache held a body key of the old form: emptied, refilled with the new
        twin = mem.write_entry("deploy-2", "again", "Deploy staging.")
        assert [(s.ref, s.how) for s in twin.similar] == [("deploy", "exact")]
        cached = dict(db_rows(mem, "SELECT name, body_key FROM entry_cache"))
        assert cached["deploy"] == similarity.text_key("Deploy staging.\n")


def test_x5_a_procedure_write_over_an_outward_symlink_is_refused(
    memory: Memory, tmp_path: Path
) -> None:  # X1: the guard never reads outside the memory root; the link is left in place
    outside = tmp_path / "outside.md"
    outside.write_text("1. tag\n", encoding="utf-8")
    Path(memory.layout.procedures_dir).mkdir(parents=True, exist_ok=True)
    os.symlink(outside, memory.layout.procedure("release"))
    with pytest.raises(ValidationError, match="symlink pointing outside"):
        memory.write_procedure("release", "1. tag\n")
    assert os.path.islink(memory.layout.procedure("release"))
    assert outside.read_text(encoding="utf-8") == "1. tag\n"
