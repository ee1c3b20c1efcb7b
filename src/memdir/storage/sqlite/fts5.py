"""The parsed query tree (storage/match.py) as an FTS5 MATCH expression: the only place a
search becomes FTS5 syntax.

Every word is re-emitted quoted, so punctuation inside a word (`foo-bar`, `node.js`,
`key:value`) can never become FTS5 syntax; a doubled quote stands for a quote.
"""

from __future__ import annotations

from ..match import Node, Word


def to_fts5(node: Node) -> str:
    if isinstance(node, Word):
        quoted = '"' + node.text.replace('"', '""') + '"'
        return quoted + "*" if node.prefix else quoted
    return f"({to_fts5(node.left)} {node.op} {to_fts5(node.right)})"
