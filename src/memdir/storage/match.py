"""The parsed search query, as a concept module hands it to a store (Q2, F4): a small tree
of records, backend-neutral. query.py builds and validates it from what the user typed; each
backend renders it in its own syntax (SQLite: sqlite/fts5.py), so user text never reaches
a backend's query language as typed."""

from __future__ import annotations

from ..records import Record


class Word(Record):
    text: str
    prefix: bool = False  # `word*`
    phrase: bool = False  # `"several words"`


class Op(Record):
    op: str  # AND | OR | NOT (`left AND NOT right`)
    left: Node
    right: Node


Node = Word | Op
