"""The query validator: FTS5 syntax kept, anything else refused with a hint (F4, Z)."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memdir import QueryError
from memdir.query import matches, parse, positive_words
from memdir.storage.sqlite.index import to_fts5

DB = sqlite3.connect(":memory:")
DB.execute("CREATE VIRTUAL TABLE t USING fts5(c, tokenize='porter unicode61 remove_diacritics 2')")
DB.execute("INSERT INTO t VALUES ('the quick brown fox jumps over the lazy dog')")

FTS_ALPHABET = st.sampled_from(
    list("abc xyz\"()*-:^+.,'")
    + ["AND", "OR", "NOT", "NEAR", " AND ", " OR ", " NOT ", "é", "東", "🎉", "\t", "\n", "\0"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(FTS_ALPHABET, max_size=20).map("".join) | st.text(max_size=60))
def test_any_text_is_a_valid_query_or_a_query_error(text: str) -> None:  # F4
    try:
        node = parse(text)
    except QueryError as exc:
        assert "\n" not in str(exc) and "(" in str(exc)
        return
    DB.execute("SELECT count(*) FROM t WHERE t MATCH ?", (to_fts5(node),)).fetchone()


@pytest.mark.parametrize(
    ("query", "fts"),
    [
        ("deploy staging", '("deploy" AND "staging")'),
        ("a OR b c", '("a" OR ("b" AND "c"))'),
        ('"exact phrase" NOT x', '("exact phrase" NOT "x")'),
        ("pre*", '"pre"*'),
        ('"multi word"*', '"multi word"*'),
        ("foo-bar (x OR y)", '("foo-bar" AND ("x" OR "y"))'),
        ('say ""hi""', '("say" AND "hi")'),
        ('"she said ""hi"""', '"she said ""hi"""'),
        ("and or not", '(("and" AND "or") AND "not")'),
    ],
)
def test_fts5_meaning_is_kept_and_words_are_quoted(query: str, fts: str) -> None:  # F4
    assert to_fts5(parse(query)) == fts


def test_substring_evaluation_follows_the_same_tree() -> None:  # P3
    node = parse('deploy (staging OR prod) NOT "dry run"')
    assert matches(node, "how to deploy to staging")
    assert not matches(node, "deploy to staging as a dry run")
    assert not matches(node, "deploy to qa")
    assert positive_words(node) == ["deploy", "staging", "prod"]
