"""F3: validity windows — what was true when (search --as-of, fact history) — and the
record of which facts searches find (doctor's "never recalled", N2)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from memdir import Memory
from memdir.errors import ConflictError, ValidationError
from memdir.testing import FixedClock
from memdir.tools import call_tool


def moved(memory: Memory) -> tuple[int, int, int]:
    """Berlin (2020) -> Paris (from 2024-06-01) -> Lisbon (from 2025-03-10)."""
    berlin = memory.add_fact("The user lives in Berlin", "preference", valid_from="2020-01-01")
    paris = memory.supersede_fact(berlin.id, "The user lives in Paris", valid_from="2024-06-01")
    lisbon = memory.supersede_fact(
        paris.id, "The user lives in Lisbon", valid_from="2025-03-10T09:30:00+01:00"
    )
    return berlin.id, paris.id, lisbon.id


def test_a_new_fact_holds_from_its_creation(memory: Memory) -> None:  # F3 F5
    fact = memory.add_fact("CI takes 12 minutes", "learning")
    assert fact.valid_from == fact.created and fact.valid_to is None


def test_supersede_closes_the_old_window_where_the_new_one_opens(memory: Memory) -> None:
    berlin, paris, lisbon = moved(memory)  # F3
    chain = memory.fact_history(paris)
    assert [f.id for f in chain] == [berlin, paris, lisbon]
    assert [(f.valid_from, f.valid_to) for f in chain] == [
        ("2020-01-01T00:00:00Z", "2024-06-01T00:00:00Z"),
        ("2024-06-01T00:00:00Z", "2025-03-10T08:30:00Z"),  # stored in UTC
        ("2025-03-10T08:30:00Z", None),
    ]


def test_a_removed_fact_ends_when_it_was_removed(state_dir: Path) -> None:  # F3
    clock = FixedClock(1_700_000_000.0)
    with Memory(clock=clock) as mem:
        fact = mem.add_fact("temporary fact", "learning")
        clock.advance(3600)
        gone = mem.remove_fact(fact.id)
        assert gone.valid_to == gone.updated and gone.valid_to > fact.valid_from


@pytest.mark.parametrize(
    ("as_of", "city"),
    [
        ("2019-12-31", None),  # before anything was known
        ("2020-01-01", "Berlin"),  # a date alone means its end
        ("2023-07-15", "Berlin"),
        ("2024-05-31T23:59:59Z", "Berlin"),
        ("2024-06-01", "Paris"),
        ("2025-03-10T08:29:59Z", "Paris"),
        ("2025-03-10T08:30:00Z", "Lisbon"),
        ("2026-01-01", "Lisbon"),
    ],
)
def test_search_as_of_answers_what_held_then(memory: Memory, as_of: str, city: str | None) -> None:
    moved(memory)  # F3
    hits = memory.search("where does the user live", as_of=as_of)
    assert [h.content.rsplit(" ", 1)[-1] for h in hits] == ([city] if city else [])
    assert all(h.kind == "fact" for h in hits)


def test_as_of_searches_facts_only_and_a_superseded_hit_says_when_it_ended(
    memory: Memory,
) -> None:  # F3 Q1
    berlin, _paris, _lisbon = moved(memory)
    memory.write_entry("berlin-notes", "Berlin notes", "Berlin has good bakeries")
    [hit] = memory.search("Berlin", as_of="2022-01-01")
    assert (hit.kind, hit.id, hit.valid_to) == ("fact", berlin, "2024-06-01T00:00:00Z")
    now = memory.search("Berlin", mode="lexical")
    assert [h.kind for h in now] == ["global"]  # today, only the entry mentions Berlin


def test_as_of_honours_category_and_since(memory: Memory) -> None:  # F3 F4
    moved(memory)
    memory.add_fact("The user lives far from Paris", "learning", valid_from="2021-01-01")
    assert len(memory.search("Paris", as_of="2024-07-01")) == 2
    assert [
        h.category for h in memory.search("Paris", as_of="2024-07-01", category="learning")
    ] == ["learning"]


def test_a_removed_fact_is_never_true_as_of_any_date(memory: Memory) -> None:  # F3
    wrong = memory.add_fact("The user hates coffee", "preference", valid_from="2020-01-01")
    memory.remove_fact(wrong.id)
    assert memory.search("coffee", as_of="2020-06-01") == []


def test_bad_dates_are_clear_errors(memory: Memory) -> None:  # F3 Z
    with pytest.raises(ValidationError, match="bad date 'yesterday-ish'"):
        memory.search("x", as_of="yesterday-ish")
    with pytest.raises(ValidationError, match="bad date"):
        memory.add_fact("x y z", "learning", valid_from="31/12/2020")


def test_the_tool_takes_as_of_and_valid_from(memory: Memory) -> None:  # F3 A1
    first = call_tool(
        memory,
        "memory_update",
        {"content": "Team lead is Ana", "category": "decision", "valid_from": "2023-01-01"},
    )
    call_tool(
        memory,
        "memory_update",
        {
            "action": "supersede",
            "supersedes": first["fact"]["id"],
            "content": "Team lead is Bo",
            "valid_from": "2025-01-01",
        },
    )
    then = call_tool(memory, "memory_search", {"query": "team lead", "as_of": "2024-01-01"})
    assert [h["content"] for h in then["hits"]] == ["Team lead is Ana"]
    assert then["hits"][0]["valid_to"] == "2025-01-01T00:00:00Z"


def test_the_cli_timeline_and_as_of(run: Any) -> None:  # F3 C
    run("fact", "add", "Lead is Ana", "-c", "decision", "--valid-from", "2023-01-01")
    run("fact", "supersede", "1", "Lead is Bo", "--valid-from", "2025-01-01")
    timeline = run("fact", "history", "2").out.splitlines()
    assert (
        timeline[0] == "#1 [decision] 2023-01-01T00:00:00Z -> 2025-01-01T00:00:00Z, "
        "superseded by #2"
    )
    assert timeline[2] == "#2 [decision] 2025-01-01T00:00:00Z -> now"
    hits = run("search", "lead", "--as-of", "2024-02-02", "--json").json()
    assert [(h["id"], h["valid_to"]) for h in hits] == [(1, "2025-01-01T00:00:00Z")]
    bad = run("search", "lead", "--as-of", "soon")
    assert bad.code == 1 and bad.err.startswith("memdir: error: bad date 'soon'")


def test_searches_record_which_facts_they_found(state_dir: Path) -> None:  # N2
    clock = FixedClock(1_700_000_000.0)  # 2023-11-14T22:13:20Z
    with Memory(clock=clock) as mem:
        found = mem.add_fact("kiwi harvest is in March", "learning")
        never = mem.add_fact("the printer is on floor two", "learning")
        clock.advance(200 * 86400)
        mem.search("kiwi", mode="lexical")
    with Memory(clock=clock) as mem:
        stale = mem.store.stale_facts("2024-01-01T00:00:00Z")
        assert [f.id for f in stale] == [never.id] and found.id != never.id


def test_a_subagent_search_records_nothing(memory: Memory, run: Any) -> None:  # N2 U2
    memory.add_fact("kiwi harvest is in March", "learning")
    parent = memory.start_session()
    child = memory.start_session(parent=parent.id)
    assert run("search", "kiwi", "--mode", "lexical", "--session", child.id).code == 0
    with Memory() as mem:
        assert mem.store.stale_facts("9999-01-01T00:00:00Z") != []
        mem.flush_hits()
        rows = mem.store._require().execute("SELECT count(*) FROM fact_usage").fetchone()
        assert rows == (0,)
    assert run("search", "kiwi", "--mode", "lexical").code == 0
    with Memory() as mem:
        mem.flush_hits()
        rows = mem.store._require().execute("SELECT hits FROM fact_usage").fetchall()
        assert rows == [(1,)]


@pytest.mark.sqlite_only
def test_a_search_writes_nothing_to_the_database(memory: Memory, run: Any) -> None:  # N2 C
    """A read path never writes memory.db: the hits of a search wait in the store's
    journal (doctor reads it meanwhile: test_searches_record_which_facts_they_found), and
    the next write records them."""
    kiwi = memory.add_fact("kiwi harvest is in March", "learning")
    assert run("search", "kiwi", "--mode", "lexical").code == 0  # the once-only notice
    db = Path(memory.layout.db)
    memory.close()
    # a forked call leaves the WAL open (C1), and whether this close folded it depends on
    # whether another connection (the fork server's look between calls) was open: the
    # search must add nothing to the database or to its WAL, whatever they hold now
    wal = Path(f"{db}-wal")
    before = (db.read_bytes(), wal.read_bytes() if wal.exists() else b"")
    assert run("search", "kiwi", "--mode", "lexical").code == 0
    assert (db.read_bytes(), wal.read_bytes() if wal.exists() else b"") == before
    with Memory() as mem:
        mem.add_fact("the printer is on floor two", "learning")  # a write records them
        rows = mem.store._require().execute("SELECT fact_id, hits FROM fact_usage").fetchall()
        assert rows == [(kiwi.id, 2)]
    assert not Path(f"{db}-hits").exists()


@pytest.mark.sqlite_only
def test_a_search_behind_a_writer_answers_and_keeps_its_hits(
    memory: Memory, run: Any
) -> None:  # N2 C
    """Another process holding the write lock does not hold a search up: it answers, and
    its hits are recorded by the next write."""
    import sqlite3

    kiwi = memory.add_fact("kiwi harvest is in March", "learning")
    assert run("search", "kiwi", "--mode", "lexical").code == 0  # the once-only notice
    memory.flush_hits()
    writer = sqlite3.connect(memory.layout.db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        found = run("search", "kiwi", "--mode", "lexical", "--json")
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert found.code == 0 and [h["id"] for h in found.json()] == [kiwi.id]
    memory.flush_hits()
    rows = memory.store._require().execute("SELECT hits FROM fact_usage").fetchall()
    assert rows == [(2,)]


@pytest.mark.sqlite_only
def test_a_journal_left_by_a_killed_writer_is_folded_by_the_next(
    memory: Memory, tmp_path: Path
) -> None:  # N2
    """A writer takes the hits journal by renaming it, then records it; one killed in
    between leaves `memory.db-hits.<pid>.<n>`. The next writer folds those hits in (none is
    lost, none counted twice) and the file goes."""
    import subprocess
    import sys

    kiwi = memory.add_fact("kiwi harvest is in March", "learning")
    memory.search("kiwi", mode="lexical")
    db = memory.layout.db
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    os.rename(f"{db}-hits", f"{db}-hits.{int(dead.stdout)}.0")  # what a killed writer leaves
    live = f"{db}-hits.{os.getppid()}.0"  # a live process's: it is folding it, left alone
    Path(live).write_text(f"{kiwi.id} 2026-01-01T00:00:00Z\n")
    memory.flush_hits()
    memory.flush_hits()
    rows = memory.store._require().execute("SELECT hits FROM fact_usage").fetchall()
    assert rows == [(1,)]
    left = sorted(p.name for p in Path(db).parent.iterdir() if p.name.startswith("memory.db-hits"))
    assert left == [Path(live).name]
    from memdir.curation import doctor

    strays = [f.where for f in doctor.run(memory).findings if f.check == "layout.stray"]
    assert strays == []  # a journal being folded is not a stray file


@pytest.mark.sqlite_only
def test_a_journal_past_its_cap_is_folded_by_a_search_when_the_db_is_free(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:  # N2 C
    """A store only ever searched must not grow its journal without end: the search that
    takes it past HITS_JOURNAL_MAX records it, if no other process is writing at that
    instant; behind a writer it does not wait and keeps the journal."""
    import sqlite3

    from memdir.storage.sqlite import curation

    kiwi = memory.add_fact("kiwi harvest is in March", "learning")
    journal = Path(f"{memory.layout.db}-hits")
    monkeypatch.setattr(curation, "HITS_JOURNAL_MAX", 100)
    writer = sqlite3.connect(memory.layout.db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        for _ in range(6):
            assert [h.id for h in memory.search("kiwi", mode="lexical")] == [kiwi.id]
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert journal.stat().st_size > 100  # behind the writer: kept, not waited for
    memory.search("kiwi", mode="lexical")
    assert not journal.exists()
    rows = memory.store._require().execute("SELECT hits FROM fact_usage").fetchall()
    assert rows == [(7,)]


def test_a_fact_cannot_begin_in_the_future_or_before_what_it_replaces(
    memory: Memory,
) -> None:  # F3 Z
    with pytest.raises(ValidationError, match="in the future"):
        memory.add_fact("Office is in Munich", "decision", valid_from="2999-01-01")
    berlin = memory.add_fact("Office is in Berlin", "decision", valid_from="2025-01-01")
    with pytest.raises(ValidationError, match="in the future"):
        memory.supersede_fact(berlin.id, "Office is in Munich", valid_from="2999-01-01")
    with pytest.raises(ConflictError, match="cannot begin before"):
        memory.supersede_fact(berlin.id, "Office is in Munich", valid_from="2024-01-01")
    assert memory.get_fact(berlin.id).status == "active"


def test_imported_superseded_facts_held_until_their_successor(memory: Memory) -> None:
    """F3 on import (N3, N4): a superseded fact that brings no end held until the next version
    began, so --as-of finds it in between."""
    memory.import_facts(
        [
            {
                "id": 1,
                "category": "preference",
                "content": "User lives in Berlin",
                "status": "superseded",
                "created": "2024-01-01T10:00:00Z",
                "superseded_by": 2,
            },
            {
                "id": 2,
                "category": "preference",
                "content": "User lives in Paris",
                "created": "2024-06-01T10:00:00Z",
                "supersedes": 1,
            },
        ]
    )
    [hit] = memory.search("where does the user live", as_of="2024-03-01")
    assert hit.content == "User lives in Berlin" and hit.valid_to == "2024-06-01T10:00:00Z"
