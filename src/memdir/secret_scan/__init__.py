"""Secrets never reach memory (X2): every field a write stores (its text, and its
provenance: agent, workflow, step, task and session ids, names, descriptions, headings)
is scanned before anything is written, and a secret is refused with the kind of secret,
the field and the line.

Each text is matched as written, normalised (Unicode compatibility forms, invisible
characters, look-alike letters, escapes: normalise.py), with its lines and string pieces
joined, and inside the base64 or hex runs long enough to hide a key (bounded: the cost
stays linear). The shapes (patterns.py) are the providers' token formats plus the generic
credential-named assignment whose value looks like a credential.

This package only finds and masks (it imports nothing of memdir, so the exception tree can
mask what an error quotes); secret_guard.py refuses the write.

Our own patterns rather than detect-secrets: that library costs ~200 ms of import on every
CLI write, and its entropy plugins flag ordinary prose unless wrapped in its file filters.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from . import normalise as _normalise
from .patterns import (
    ASSIGNMENT,
    ASSIGNMENT_NEEDLES,
    FLAG,
    SHAPES,
    VALUE_TESTS,
    credential_value,
    secret_name,
)

PATTERNS = SHAPES  # the provider formats, for the benchmark's count
MAX_DEPTH = 2  # base64 inside base64 is decoded; deeper is not
ENCODED = " (encoded)"


class Found(NamedTuple):
    kind: str  # "a GitHub token"
    line: int  # 1-based, in the text as given
    excerpt: str  # masked: enough to recognise it, not enough to use it


def find(text: str) -> Found | None:
    """The first secret in `text` as (kind, line, masked excerpt), or None."""
    if not text:
        return None
    hit = _find(text, 0)
    if hit is None:
        return None
    kind, value = hit
    return Found(kind, _locate(text, value), _mask(value))


def redact(text: str) -> str:
    """`text` with each secret in it masked (an error message that quotes what it refused,
    X2): a secret found only once decoded or normalised cannot be cut out, so then the
    whole text is withheld, saying what it held."""
    for _ in range(8):
        hit = _find(text, 0)
        if hit is None:
            return text
        kind, value = hit
        if not value or value not in text:
            return f"(withheld: the message quoted what looks like {kind})"
        text = text.replace(value, _mask(value))
    return "(withheld: the message quoted what look like secrets)"


def _find(text: str, depth: int) -> tuple[str, str] | None:
    """(kind, the secret as matched) in any form of `text`, or None."""
    normal = _normalise.normalise(text)
    joined = _normalise.joined(normal)
    forms = [(text, True)]
    if normal != text:
        forms.append((normal, True))
    if joined != normal:
        forms.append((joined, False))  # joined lines: formats only (no prose rules)
    longest: dict[str, int] = {}  # each form's longest word, measured once
    for form, generic in forms:
        hit = _match(form, generic, longest)
        if hit is not None:
            return hit
    if depth >= MAX_DEPTH:
        return None
    seen: set[str] = set()
    for form in dict.fromkeys((normal, joined)):
        if longest.get(form, _normalise.MAX_RUN) < _normalise.RUN_MIN:
            continue  # no word long enough to be an encoded run (what decoded_runs checks)
        for plain in _normalise.decoded_runs(form):
            if plain in seen:
                continue
            seen.add(plain)
            hit = _find(plain, depth + 1)
            if hit is not None:
                kind = hit[0] if hit[0].endswith(ENCODED) else hit[0] + ENCODED
                return kind, hit[1]
    return None


def _match(text: str, generic: bool, longest: dict[str, int]) -> tuple[str, str] | None:
    lowered = text.lower()
    words = lowered.split()
    # the longest whitespace-free run of `text`: lower() keeps an ASCII text's lengths
    run = longest[text] = max(map(len, words if text.isascii() else text.split()), default=0)
    present = _present(lowered, words)  # the shapes whose needles occur
    for number in sorted(present):
        shape = SHAPES[number]
        if run < shape.min_run:
            continue  # no word long enough to hold one (a needle such as "." is in all prose)
        pattern = _pattern(number)
        for match in pattern.finditer(text):
            value = match.group(1) if pattern.groups else match.group(0)
            if shape.check and not VALUE_TESTS[shape.check](value):
                continue
            return shape.kind, value
    if not generic or GENERIC not in present:
        return None
    if "=" in text or ":" in text:
        for match in ASSIGNMENT.finditer(text):
            name = match.group(1)
            value = match.group(2) or match.group(3) or match.group(4) or ""
            what = secret_name(name)
            if what is not None and credential_value(what, value):
                return f"a {name} value", value
    if "-" in text:
        for match in FLAG.finditer(text):
            what = "password" if "pass" in match.group(1).lower() else "secret"
            if credential_value(what, match.group(2)):
                return f"a --{match.group(1)} value", match.group(2)
    return None


GENERIC = -1  # the number standing for the generic rules in _index


_PATTERNS: dict[int, re.Pattern[str]] = {}


def _pattern(number: int) -> re.Pattern[str]:
    """The shape's regex, compiled when a text first holds its needle (not all ~70 on
    every CLI write)."""
    found = _PATTERNS.get(number)
    if found is None:
        found = _PATTERNS[number] = re.compile(SHAPES[number].pattern)
    return found


def _present(lowered: str, split: list[str] | None = None) -> set[int]:
    """The shapes whose needles occur in `lowered`: exactly those of a substring test of
    every needle. Many short texts in a row (a bulk import) repeat a few thousand words,
    so past the first few texts of a process each distinct word is tested once and
    remembered: no needle holds whitespace, so each occurrence lies inside one
    whitespace-separated word, and a text of known words costs a split and a few set
    operations in C rather than ~130 substring tests in Python. `split`: lowered.split(),
    when the caller has it already."""
    global _scans
    if _scans < LEARN_AFTER:  # a CLI write scans a few fields: nothing to amortise
        _scans += 1
        return _in_text(lowered, _index())
    words = lowered.split() if split is None else split
    seen, hits = _MEMO  # one object: a reset elsewhere never pairs old and new halves
    if not seen.issuperset(words):  # (the common case, every word known, builds no set)
        new = set(words) - seen
        if len(new) > FEW_NEW:
            # many unseen words: every needle once against the whole text (the answer),
            # and, in a short text, each new word learns which of the few found it holds
            # (a needle in a word is in the text)
            found = tuple(pair for pair in _word_needles() if pair[0] in lowered)
            if len(new) <= LEARN_MAX:
                if len(seen) > MEMO_LIMIT:
                    seen, hits = _reset()
                _learn(new, found, seen, hits)
            return _in_text(lowered, _spaced_needles(), _in_text(lowered, found))
        if len(seen) > MEMO_LIMIT:
            seen, hits = _reset()
            new = set(words)  # the text's known words were forgotten with the rest
        _learn(new, _word_needles(), seen, hits)
    present: set[int] = set().union(*filter(None, map(hits.get, words)))
    return _in_text(lowered, _spaced_needles(), present)  # none today; exact should one be


def _in_text(
    lowered: str, needles: tuple[tuple[str, frozenset[int]], ...], into: set[int] | None = None
) -> set[int]:
    present: set[int] = set() if into is None else into
    for needle, numbers in needles:
        if needle in lowered:
            present |= numbers
    return present


def _learn(
    words: set[str],
    needles: tuple[tuple[str, frozenset[int]], ...],
    seen: set[str],
    hits: dict[str, frozenset[int]],
) -> None:
    for word in words:
        numbers = _needled(word, needles)
        if numbers:
            hits[word] = numbers
    seen |= words  # after hits: a word seen is a word whose needles are known


_scans = 0  # texts this process scanned, up to LEARN_AFTER
LEARN_AFTER = 16  # texts scanned plainly before words are remembered
LEARN_MAX = 200  # unseen words a text may hold and still teach them (a fact, not a file)
MEMO_LIMIT = 50_000  # distinct words remembered (a few MB); past it the memo starts again
FEW_NEW = 2  # unseen words a text may hold and still have each tested on its own
# (every word tested, the tested words holding a needle -> the shapes of those needles)
_MEMO: tuple[set[str], dict[str, frozenset[int]]] = (set(), {})


def _reset() -> tuple[set[str], dict[str, frozenset[int]]]:
    """Fresh memos, rebound rather than cleared: a thread using the old ones keeps them."""
    global _MEMO
    _MEMO = (set(), {})
    return _MEMO


def _needled(word: str, needles: tuple[tuple[str, frozenset[int]], ...]) -> frozenset[int]:
    """The shapes whose needles occur in one word (a substring test each)."""
    found: set[int] = set()
    for needle, numbers in needles:
        if needle in word:
            found |= numbers
    return frozenset(found)


def _whitespace_free(needle: str) -> bool:
    return needle.split() == [needle]


@lru_cache(maxsize=1)
def _word_needles() -> tuple[tuple[str, frozenset[int]], ...]:
    return tuple(pair for pair in _index() if _whitespace_free(pair[0]))


@lru_cache(maxsize=1)
def _spaced_needles() -> tuple[tuple[str, frozenset[int]], ...]:
    return tuple(pair for pair in _index() if not _whitespace_free(pair[0]))


@lru_cache(maxsize=1)
def _index() -> tuple[tuple[str, frozenset[int]], ...]:
    """Each distinct needle with the shapes that need it: ~100 substring tests decide
    which of the ~70 patterns run on a text (most texts: none)."""
    owners: dict[str, set[int]] = {}
    for number, shape in enumerate(SHAPES):
        for needle in shape.needles:
            owners.setdefault(needle, set()).add(number)
    for needle in ASSIGNMENT_NEEDLES:
        owners.setdefault(needle, set()).add(GENERIC)
    return tuple((needle, frozenset(numbers)) for needle, numbers in owners.items())


def _locate(text: str, value: str) -> int:
    """The line of `text` the secret is on: where it is written as matched, else the first
    line (or the first few lines together: a key split across them) that holds it."""
    index = text.find(value)
    if index >= 0:
        return text.count("\n", 0, index) + 1
    lines = text.split("\n")
    if len(lines) == 1 or len(lines) > 2000:
        return 1
    for size in (1, 2, 4, 8):
        for start in range(len(lines)):
            if _find("\n".join(lines[start : start + size]), 0) is not None:
                return start + 1
    return 1


def _mask(value: str) -> str:
    """Enough to recognise it, not enough to use it."""
    if len(value) <= 8:
        return "*" * len(value)
    return f"{value[:4]}…{value[-2:]}"
