"""User search queries: FTS5 syntax (AND, OR, NOT, "phrases", prefix*) parsed and validated
here into a tree (storage/rows.py), which is what crosses to the store: each backend
renders it in its own syntax (SQLite: storage/sqlite/index.py, every word quoted), so user
text never reaches MATCH as typed. Words with no letter or digit in them (`-`, `:`, an
emoji) are dropped, since they could only ever match nothing.

Precedence follows FTS5: NOT binds tightest, then AND (also implied between words), then OR.
The same tree evaluates as substring tests for the files that are not in FTS5 (P3).
"""

from __future__ import annotations

import re

from .errors import QueryError
from .records import Record

# -- the tree that crosses to the store (storage/rows.py carries it) -------------------


class Word(Record):
    text: str
    prefix: bool = False  # `word*`
    phrase: bool = False  # `"several words"`


class Op(Record):
    op: str  # AND | OR | NOT (`left AND NOT right`)
    left: Node
    right: Node


Node = Word | Op


OPERATORS = ("AND", "OR", "NOT")
SYNTAX_HINT = 'use words, "exact phrases", prefix*, AND, OR, NOT and parentheses'


STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t d ll m re ve don
didn doesn isn wasn weren won wouldn shouldn couldn hasn haven hadn aren ever also
""".split()
)
WORD_RE = re.compile(r"\w+")


def parse_search(query: str) -> Node | None:
    """What a search runs (Q2): a query written in FTS5 syntax keeps its meaning (F4); a plain
    question becomes the OR of its words without stopwords (bm25 ranks the documents that
    match more, and rarer, words first). None when there is no word to look for."""
    if is_structured(query):
        return parse(query)
    words = [w.lower() for w in WORD_RE.findall(query.replace("\0", " "))]
    words = [w for w in words if w.strip("_")]
    if not words:
        return None
    # all stopwords ("what's up"): keep them, but not the single letters of contractions
    kept = [w for w in words if w not in STOPWORDS] or [w for w in words if len(w) > 1] or words
    node: Node = Word(kept[0])
    for word in dict.fromkeys(kept[1:]):
        if word != kept[0]:
            node = Op("OR", node, Word(word))
    return node


def is_structured(query: str) -> bool:
    """Written in FTS5 syntax: parentheses, an upper-case operator, a prefix*, or quotes,
    except quotes inside a sentence (`When did Jon read "The Lean Startup"?`): a title
    quoted in a question is not a request to AND every other word of it."""
    if any(ch in query for ch in "()"):
        return True
    if any(t in OPERATORS or (len(t) > 1 and t.endswith("*")) for t in query.split()):
        return True
    return '"' in query and not _is_sentence(query)


def _is_sentence(query: str) -> bool:
    """Outside its quotes, the query has a stopword: it reads as prose, not as syntax."""
    outside = re.sub(r'"[^"]*"', " ", query)
    return any(w.lower() in STOPWORDS for w in WORD_RE.findall(outside))


def parse(query: str) -> Node:
    """The query as a tree; a QueryError with a hint when it cannot be read."""
    tokens = _tokens(query)
    if not any(isinstance(t, Word) for t in tokens):
        raise QueryError(
            "the search query has no words to look for",
            hint="give at least one word with a letter or digit",
        )
    parser = _Parser(tokens)
    node = parser.expression()
    if parser.peek() is not None:
        raise QueryError("unbalanced ')' in the search query", hint="remove it or add a '('")
    return node


def matches(node: Node, text: str) -> bool:
    """Evaluate the tree with case-insensitive substring tests over `text` (lowercased)."""
    if isinstance(node, Word):
        return " ".join(node.text.lower().split()) in text
    if node.op == "AND":
        return matches(node.left, text) and matches(node.right, text)
    if node.op == "OR":
        return matches(node.left, text) or matches(node.right, text)
    return matches(node.left, text) and not matches(node.right, text)


def positive_words(node: Node) -> list[str]:
    """Lowercased words that count towards a match (not those after NOT), for scoring."""
    if isinstance(node, Word):
        return [" ".join(node.text.lower().split())]
    if node.op == "NOT":
        return positive_words(node.left)
    return positive_words(node.left) + positive_words(node.right)


# -- tokenizer and parser --------------------------------------------------------------

Token = Word | str  # str: an operator or a parenthesis


def _tokens(query: str) -> list[Token]:
    tokens: list[Token] = []
    query = query.replace("\0", " ")  # SQLite would end the string at a NUL
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(ch)
            i += 1
        elif ch == '"':
            i = _phrase(query, i, tokens)
        else:
            j = i
            while j < n and not query[j].isspace() and query[j] not in '()"':
                j += 1
            _word(query[i:j], tokens)
            i = j
    return tokens


def _phrase(query: str, start: int, tokens: list[Token]) -> int:
    """Read `"..."` (a doubled quote inside stands for one quote); return the next index."""
    i, parts = start + 1, []
    while True:
        end = query.find('"', i)
        if end < 0:
            raise QueryError(
                "unclosed '\"' in the search query", hint="close the phrase with a second '\"'"
            )
        parts.append(query[i:end])
        if query.startswith('""', end):
            parts.append('"')
            i = end + 2
            continue
        i = end + 1
        break
    text = "".join(parts)
    prefix = query.startswith("*", i)
    if _has_token_chars(text):
        tokens.append(Word(text, prefix=prefix, phrase=True))
    return i + 1 if prefix else i


def _word(raw: str, tokens: list[Token]) -> None:
    if raw in OPERATORS:
        tokens.append(raw)
        return
    prefix = raw.endswith("*")
    text = raw.rstrip("*")
    if _has_token_chars(text):
        tokens.append(Word(text, prefix=prefix))


def _has_token_chars(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens, self.pos = tokens, 0

    def peek(self) -> Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> Token | None:
        token = self.peek()
        self.pos += 1
        return token

    def expression(self) -> Node:
        node = self.conjunction()
        while self.peek() == "OR":
            self.take()
            node = Op("OR", node, self.conjunction("OR"))
        return node

    def conjunction(self, after: str | None = None) -> Node:
        node = self.negation(after)
        while True:
            token = self.peek()
            if token == "AND":
                self.take()
                node = Op("AND", node, self.negation("AND"))
            elif isinstance(token, Word) or token == "(":
                node = Op("AND", node, self.negation())
            else:
                return node

    def negation(self, after: str | None = None) -> Node:
        node = self.operand(after)
        while self.peek() == "NOT":
            self.take()
            node = Op("NOT", node, self.operand("NOT"))
        return node

    def operand(self, after: str | None) -> Node:
        token = self.take()
        if isinstance(token, Word):
            return token
        if token == "(":
            if self.peek() == ")":
                raise QueryError("empty parentheses in the search query", hint=SYNTAX_HINT)
            node = self.expression()
            if self.take() != ")":
                raise QueryError("unclosed '(' in the search query", hint="add the missing ')'")
            return node
        if after is not None:
            raise QueryError(
                f"{after} has nothing after it in the search query",
                hint=f"write 'deploy {after} staging'; to search for the word "
                f"itself, write it in lowercase",
            )
        if token in OPERATORS:
            raise QueryError(
                f"{token} has nothing before it in the search query",
                hint=f"write 'deploy {token} staging'; to search for the word "
                f"itself, write it in lowercase",
            )
        if token == ")":
            raise QueryError("unbalanced ')' in the search query", hint="remove it or add a '('")
        raise QueryError("the search query ends too early", hint=SYNTAX_HINT)
