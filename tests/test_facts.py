"""The fact archive: categories, supersede chains, removal, search, provenance (F1-F5)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from memdir import (
    CATEGORIES,
    ConflictError,
    Memory,
    NotFoundError,
    QueryError,
    ValidationError,
    advice,
)
from memdir.testing import FixedClock


@pytest.mark.sqlite_only
def test_archive_is_sqlite_wal_with_fts5(memory: Memory) -> None:  # F1
    memory.add_fact("The CI runs on GitHub Actions", "learning")
    db = sqlite3.connect(memory.layout.db)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    assert {"facts", "facts_fts", "schema_migrations"} <= tables
    assert db.execute("SELECT version, name FROM schema_migrations").fetchall()[0][0] == 1


def test_archive_is_unbounded(memory: Memory) -> None:  # F1
    ids = memory.add_facts(
        [(f"bulk fact number {i} about topic{i % 7}", "learning") for i in range(3000)]
    )
    assert len(ids) == 3000 and len(set(ids)) == 3000
    assert memory.store.count_facts()["active"] == 3000


@pytest.mark.parametrize("category", CATEGORIES)
def test_each_category_is_accepted(memory: Memory, category: str) -> None:  # F2
    assert memory.add_fact(f"a {category}", category).category == category


@pytest.mark.parametrize("category", ["", "Preference", "fact", "todo", None])
def test_unknown_category_is_a_clear_error_and_nothing_is_written(
    memory: Memory, category: str | None
) -> None:  # F2
    with pytest.raises(ValidationError, match="preference, convention, decision, learning"):
        memory.add_fact("something", category)  # type: ignore[arg-type]
    assert memory.store.count_facts() == {}


def test_supersede_keeps_history_and_leaves_search(memory: Memory) -> None:  # F3
    clock = FixedClock()
    mem = Memory(clock=clock)
    old = mem.add_fact("Deploys happen on Fridays", "decision")
    clock.advance(3600)
    new = mem.supersede_fact(old.id, "Deploys happen on Tuesdays")
    assert new.supersedes == old.id and new.category == "decision"
    found = mem.search("deploys", mode="lexical")
    assert [h.content for h in found] == ["Deploys happen on Tuesdays"]
    history = mem.fact_history(old.id)
    assert [f.id for f in history] == [old.id, new.id]
    assert history[0].status == "superseded" and history[0].superseded_by == new.id
    assert history[0].created < history[1].created  # timestamps tell the order
    assert mem.fact_history(new.id) == history  # the chain from either end


def test_supersede_chain_of_three_and_category_change(memory: Memory) -> None:  # F3
    a = memory.add_fact("Use black", "convention")
    b = memory.supersede_fact(a.id, "Use ruff format")
    c = memory.supersede_fact(b.id, "Use ruff format, line length 100", category="decision")
    assert [f.id for f in memory.fact_history(b.id)] == [a.id, b.id, c.id]
    assert c.category == "decision"


def test_supersede_needs_a_fact_that_was_not_removed(memory: Memory) -> None:  # F3
    a = memory.add_fact("v1", "learning")
    memory.remove_fact(a.id)
    with pytest.raises(ConflictError, match=f"fact {a.id} was removed on .*; nothing to supersede"):
        memory.supersede_fact(a.id, "v2")
    with pytest.raises(NotFoundError):
        memory.supersede_fact(999, "v3")
    assert len(memory.fact_history(a.id)) == 1


def test_superseding_a_superseded_fact_forks_and_says_so(memory: Memory) -> None:  # F3 W1
    """Two writers superseding one fact both keep their version: the second is told in its
    hint which version holds beside it and how to keep one; both are found by search."""
    a = memory.add_fact("Releases are cut on Mondays", "decision")
    b = memory.supersede_fact(a.id, "Releases are cut on Tuesdays")
    assert b.forked == ()
    c = memory.supersede_fact(a.id, "Releases are cut on Thursdays")
    assert (c.status, c.supersedes, c.forked) == ("active", a.id, (b.id,))
    assert c.hint is not None and "\n" not in c.hint
    assert f"fact {a.id} was superseded already by fact {b.id}" in c.hint
    assert advice.fact_supersede(b.id, c.content) in c.hint
    assert advice.fact_remove(c.id) in c.hint and "resembles" not in c.hint
    assert c.to_dict()["forked"] == [b.id]
    old = memory.get_fact(a.id)
    assert (old.superseded_by, old.valid_to) == (b.id, b.valid_from)  # the first supersede's
    history = memory.fact_history(c.id)
    assert [f.id for f in history] == [a.id, b.id, c.id]
    found = {h.id for h in memory.search("releases cut", mode="lexical")}
    assert found == {b.id, c.id}


def test_a_fork_whose_first_version_was_removed_is_no_fork_to_settle(memory: Memory) -> None:
    """F3: the earlier successor no longer holds, so the new version simply holds."""
    a = memory.add_fact("The cache lives in Redis", "decision")
    b = memory.supersede_fact(a.id, "The cache lives in Memcached")
    memory.remove_fact(b.id)
    c = memory.supersede_fact(a.id, "The cache lives in Valkey")
    assert c.forked == () and c.status == "active"
    assert c.hint is not None and f"fact {b.id}, which no longer holds" in c.hint


def test_superseding_an_old_version_with_its_own_text_is_refused(memory: Memory) -> None:  # F3
    """Going back to a superseded version's text is not a duplicate of it (the later
    version would stay active): it is refused, naming the version to supersede instead;
    nothing changes."""
    a = memory.add_fact("Deploys run at noon", "decision")
    b = memory.supersede_fact(a.id, "Deploys run at midnight")
    with pytest.raises(ConflictError, match=f"superseded by fact {b.id}; supersede {b.id} instead"):
        memory.supersede_fact(a.id, "Deploys run at noon")
    assert memory.get_fact(b.id).status == "active"
    assert [f.id for f in memory.fact_history(a.id)] == [a.id, b.id]
    back = memory.supersede_fact(b.id, "Deploys run at noon")  # the way back the hint names
    assert back.status == "active" and back.supersedes == b.id


def test_settling_a_fork_by_the_other_versions_text(memory: Memory) -> None:  # F3 W1
    a = memory.add_fact("Lint with flake8", "convention")
    b = memory.supersede_fact(a.id, "Lint with ruff")
    c = memory.supersede_fact(a.id, "Lint with pylint")
    kept = memory.supersede_fact(c.id, "Lint with ruff")
    assert kept.id == b.id and not kept.duplicate
    assert kept.hint is not None and f"fact {c.id} now ends in it" in kept.hint
    assert "still forked" not in kept.hint
    statuses = {f.id: f.status for f in memory.fact_history(a.id)}
    assert statuses == {a.id: "superseded", b.id: "active", c.id: "superseded"}
    assert memory.get_fact(c.id).superseded_by == b.id


def test_fact_history_on_the_cli_shows_both_branches_of_a_fork(run: Any) -> None:  # F3 C
    assert run("fact", "add", "Use Node 18", "-c", "decision").code == 0
    assert run("fact", "supersede", "1", "Use Node 20").out.strip() == "fact 2 supersedes fact 1"
    forked = run("fact", "supersede", "1", "Use Node 22")
    assert forked.code == 0 and forked.out.strip() == "fact 3 supersedes fact 1"
    [warning] = forked.err.strip().splitlines()  # one line: what happened, what to do
    assert "fact 1 was superseded already by fact 2" in warning and "fact rm 3" in warning
    history = run("fact", "history", "3").out
    assert "superseded by #2 and #3 (forked: 2 successors)" in history
    assert "\n#2 [decision]" in history and "\n  #3 (another version of #1) [decision]" in history
    assert "    Use Node 22" in history
    as_json = run("fact", "history", "1", "--json").json()
    assert [(f["id"], f["supersedes"]) for f in as_json] == [(1, None), (2, 1), (3, 1)]


def test_remove_takes_a_fact_out_of_search_but_not_history(memory: Memory) -> None:  # F3
    fact = memory.add_fact("Temporary workaround for bug 12", "learning")
    removed = memory.remove_fact(fact.id)
    assert removed.status == "removed"
    assert memory.search("workaround", mode="lexical") == []
    assert memory.fact_history(fact.id)[0].status == "removed"
    with pytest.raises(ConflictError):
        memory.remove_fact(fact.id)


@pytest.mark.parametrize("bad", ["abc", "0", "-3", "1.5", True])
def test_bad_fact_ids_are_clear_errors(memory: Memory, bad: object) -> None:  # F3
    with pytest.raises(ValidationError, match="fact id"):
        memory.remove_fact(bad)  # type: ignore[arg-type]


def test_fts5_syntax_works(memory: Memory) -> None:  # F4
    memory.add_fact("Staging deploys need a green CI run", "convention")
    memory.add_fact("Production deploys need two approvals", "convention")
    memory.add_fact("The user drinks green tea", "preference")
    assert len(memory.search("deploys", mode="lexical")) == 2
    assert _contents(memory.search("deploys AND green")) == ["Staging deploys need a green CI run"]
    assert len(memory.search("approvals OR tea")) == 2
    assert _contents(memory.search("deploys NOT staging")) == [
        "Production deploys need two approvals"
    ]
    assert _contents(memory.search('"green tea"')) == ["The user drinks green tea"]
    assert len(memory.search("approv*")) == 1
    assert len(memory.search("(staging OR production) AND deploys")) == 2


def test_porter_stemming_matches_word_forms(memory: Memory) -> None:  # F4
    memory.add_fact("The deployment was rolled back", "learning")
    assert len(memory.search("deployment")) == 1
    assert len(memory.search("rolled")) == 1
    assert len(memory.search("roll")) == 1


def test_filters_category_since_and_limit(memory: Memory) -> None:  # F4
    clock = FixedClock(start=1_780_000_000)  # 2026-05-28
    mem = Memory(clock=clock)
    mem.add_fact("python style: ruff", "convention")
    clock.advance(10 * 86400)
    mem.add_fact("python version: 3.11", "decision")
    for i in range(15):
        mem.add_fact(f"python note {i}", "learning")
    decisions = mem.search("python", category="decision", mode="lexical")
    assert [h.category for h in decisions] == ["decision"]
    assert len(mem.search("python", mode="lexical")) == 10  # default limit
    assert len(mem.search("python", limit=3, mode="lexical")) == 3
    late = mem.search("python", since="2026-06-01", limit=100, mode="lexical")
    assert len(late) == 16 and all(h.date >= "2026-06-01" for h in late)


def test_results_are_ranked_by_bm25_with_fields(memory: Memory) -> None:  # F4
    for i in range(20):
        memory.add_fact(f"unrelated filler fact {i} about lunch", "learning")
    memory.add_fact("kubernetes kubernetes cluster upgrade notes for kubernetes", "learning")
    memory.add_fact("a passing mention of kubernetes among many many other words here", "learning")
    hits = memory.search("kubernetes", mode="lexical")
    assert hits[0].content.startswith("kubernetes kubernetes")
    assert hits[0].score > hits[1].score > 0
    for hit in hits:
        assert hit.kind == "fact" and hit.id and hit.category and hit.date


@pytest.mark.parametrize("query", ['"unclosed', "a AND", "OR b", "NOT x", "(a", "a)", "()"])
def test_malformed_queries_are_clear_errors(memory: Memory, query: str) -> None:  # F4
    memory.add_fact("something to search", "learning")
    with pytest.raises(QueryError) as info:
        memory.search(query)
    message = str(info.value)
    assert "\n" not in message and "fts5" not in message.lower()
    assert "(" in message  # a hint follows


@pytest.mark.parametrize(
    "query",
    [
        "foo-bar",
        "node.js",
        "key:value",
        "it's",
        "c++",
        "naïve",
        "東京",
        "col:umn*",
        "NEAR",
        "a - b",
    ],
)
def test_punctuation_and_scripts_never_break_search(memory: Memory, query: str) -> None:  # F4
    memory.add_fact(f"we talked about {query} today", "learning")
    assert memory.search(query), query


@pytest.mark.parametrize("query", ["", "   ", "-", "🎉", "?!", "\0"])
def test_queries_without_words_find_nothing_and_do_not_fail(memory: Memory, query: str) -> None:
    # F4, Q2: nothing to look for is an empty answer, not an error
    memory.add_fact("something to search", "learning")
    assert memory.search(query) == []


def test_bad_since_date_is_a_clear_error(memory: Memory) -> None:  # F4
    with pytest.raises(ValidationError, match="ISO date"):
        memory.search("x", since="last tuesday")


def test_provenance_is_recorded(memory: Memory) -> None:  # F5
    clock = FixedClock()
    session = Memory(clock=clock).start_session(surface="telegram")
    mem = Memory(session=session.id, agent="triage", clock=clock)
    fact = mem.add_fact("User is on call this week", "learning")
    assert (fact.session_id, fact.surface, fact.agent) == (session.id, "telegram", "triage")
    assert fact.created == fact.updated == "2026-05-28T20:26:40Z"
    clock.advance(60)
    removed = mem.remove_fact(fact.id)
    assert removed.updated == "2026-05-28T20:27:40Z" and removed.created == fact.created
    plain = memory.add_fact("no session", "learning")
    assert (plain.session_id, plain.surface) == (None, "cli")


def test_oversized_fact_is_refused_not_cut(memory: Memory) -> None:  # X3
    cap = memory.settings.max_entry_bytes
    with pytest.raises(ValidationError, match="over the cap"):
        memory.add_fact("ü" * (cap // 2 + 1), "learning")  # under the cap in chars, over in bytes
    assert memory.store.count_facts() == {}
    assert memory.add_fact("x" * cap, "learning").content == "x" * cap


def test_empty_fact_is_refused(memory: Memory) -> None:  # F3
    with pytest.raises(ValidationError, match="empty"):
        memory.add_fact("  \n ", "learning")


def _contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.content for h in hits]
