"""V3: why a hit is in a search's answer, said from what the answer holds.

The ranking (search/__init__.py) adds a hit's word score (bm25), its similarity by meaning
(hybrid, semantic) and its context (Q3: its neighbours' and its group's scores) into one
number. This says which of those can have brought each hit in: the question's words found
in its text, whether it had a vector to be compared by meaning, and, for a hit that holds
none of the words, that its neighbours or group (or its meaning) did. It is read from the
hit and the question after the ranking, not recorded by it: the parts' shares of the score
are not kept."""

from __future__ import annotations

import re

from .. import query
from ..records import Record

TOKEN_RE = re.compile(r"\w+")


class Why(Record):
    """What brought a hit in: the question's words in it, and how it was ranked."""

    terms: list[str]  # the question's words found in the hit's text
    how: str  # one line: by its words, by meaning, by its context...

    def to_dict(self) -> dict[str, object]:
        return self._asdict()


def why(question: str, mode: str, content: str, lexical_only: bool | None, as_of: bool) -> Why:
    node = query.parse_search(question)
    words = list(dict.fromkeys(query.positive_words(node))) if node is not None else []
    tokens = {t.lower() for t in TOKEN_RE.findall(content)}
    text = " ".join(content.lower().split())
    found = [w for w in words if _found(w, tokens, text)]
    if as_of:
        how = "held at the asked time; ranked by its words"
    elif mode == "lexical":
        how = (
            "by its words"
            if found
            else "by its context: its neighbours or its group matched (no word of it here)"
        )
    elif mode == "semantic":
        how = "by its words: it has no vector yet" if lexical_only else "by meaning"
    elif lexical_only:
        how = "by its words (no vector yet)" if found else "by its context (no vector yet)"
    elif found:
        how = "by its words and by meaning"
    else:
        how = "by meaning or its context (no word of the question in it)"
    return Why(found, how)


def _found(word: str, tokens: set[str], text: str) -> bool:
    """The word (or phrase) is in the text, as the index tokenizes it: a phrase as it is,
    a word as a token or the stem of one (the index stems: "deploys" finds "deploy")."""
    if " " in word:
        return word in text
    stem = word[: max(4, len(word) - 2)]
    return any(
        t == word or t.startswith(stem) or (len(t) >= 4 and word.startswith(t)) for t in tokens
    )
